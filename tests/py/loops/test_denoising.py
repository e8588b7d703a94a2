"""The denoising loop on a tiny random Stable-Diffusion-shaped bundle (tests/fixtures/tiny_diffusion.py).

Oracles: the torch models driven by diffusers' schedulers (expected.json, made when the fixture
is built) and, on the same ONNX files, diffusers' schedulers driving onnxruntime sessions.
Both start from onnxpipe's seeded noise, so equality does not depend on torch's RNG.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from diffusers import DDIMScheduler, EulerDiscreteScheduler

import onnxpipe
from onnxpipe.diffusion.noise import initial_latents, normal
from onnxpipe.errors import ConfigError, InputError
from tests.fixtures import tiny_diffusion
from tests.fixtures.tiny_models import ensure, load_expected

SCHEDULERS = {"euler_discrete": EulerDiscreteScheduler, "ddim": DDIMScheduler}
TORCH_TOLERANCE = 1e-4   # ONNX kernels against torch's (measured: under 3e-6)
ORT_TOLERANCE = 1e-5     # the same ONNX files: only the scheduler arithmetic differs (measured: ~1e-6)


@pytest.fixture(scope="module")
def bundle():
    return ensure("tiny_diffusion")


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _ids(rows):
    return [i for r in rows for i in r], (len(rows), len(rows[0]))


def _run(pipe, rows, **options):
    values, shape = pipe.run({"input_ids": _ids(rows)}, **options).read("output")
    return np.array(values, np.float32).reshape(shape)


def ort_reference(folder, scheduler, steps, scale, seed, rows, unet_file="unet.onnx"):
    """diffusers' scheduler driving onnxruntime on the bundle's files (two calls when the unet's
    batch is fixed to 1)."""
    open_ = lambda f: ort.InferenceSession(str(folder / f), providers=["CPUExecutionProvider"])  # noqa: E731
    text, unet, vae = open_("text_encoder.onnx"), open_(unet_file), open_("vae_decoder.onnx")
    fixed = unet.get_inputs()[0].shape[0] == 1
    sched = SCHEDULERS[scheduler](**tiny_diffusion.SCHEDULER)
    sched.set_timesteps(steps)
    count = int(np.prod(tiny_diffusion.LATENT_SHAPE))
    latents = torch.tensor(initial_latents(seed, count, float(sched.init_noise_sigma))).reshape(tiny_diffusion.LATENT_SHAPE)
    emb = text.run(None, {"input_ids": np.array(rows, np.int64)})[0]
    guided = scale > 1
    for t in sched.timesteps:
        pair = torch.cat([latents] * 2) if guided else latents
        inp = sched.scale_model_input(pair, t).numpy()
        if guided and fixed:
            pred = np.concatenate([unet.run(None, {"sample": inp[i:i + 1], "timestep": np.array([float(t)], np.float32),
                                                   "encoder_hidden_states": emb[i:i + 1]})[0] for i in (0, 1)])
        else:
            pred = unet.run(None, {"sample": inp, "timestep": np.full([inp.shape[0]], float(t), np.float32),
                                   "encoder_hidden_states": emb})[0]
        pred = torch.from_numpy(pred)
        if guided:
            uncond, cond = pred.chunk(2)
            pred = uncond + scale * (cond - uncond)
        latents = sched.step(pred, t, latents).prev_sample
    return vae.run(None, {"latent_sample": (latents / tiny_diffusion.SCALING).numpy()})[0]


def test_images_equal_the_torch_models_under_diffusers_schedulers(bundle, pipe):
    for ref in load_expected(bundle)["references"]:
        image = _run(pipe, ref["input_ids"], scheduler=ref["scheduler"], num_steps=ref["num_steps"],
                     guidance_scale=ref["guidance_scale"], seed=ref["seed"])
        want = np.array(ref["image"], np.float32).reshape(ref["shape"])
        assert image.shape == want.shape
        np.testing.assert_allclose(image, want, rtol=0, atol=TORCH_TOLERANCE, err_msg=ref["scheduler"])
        assert want.std() > 0.1


@pytest.mark.parametrize("scheduler,steps,scale", [("euler_discrete", 5, 4.0), ("euler_discrete", 3, 1.0),
                                                   ("ddim", 4, 2.5), ("ddim", 2, 1.0)])
def test_images_equal_diffusers_schedulers_on_onnxruntime(bundle, pipe, scheduler, steps, scale):
    rows = [tiny_diffusion.IDS_UNCOND, tiny_diffusion.IDS_COND] if scale > 1 else [tiny_diffusion.IDS_COND]
    image = _run(pipe, rows, scheduler=scheduler, num_steps=steps, guidance_scale=scale, seed=11)
    want = ort_reference(bundle, scheduler, steps, scale, 11, rows)
    np.testing.assert_allclose(image, want, rtol=0, atol=ORT_TOLERANCE)


def test_bundle_defaults_and_seeds(bundle, pipe):
    rows = [tiny_diffusion.IDS_UNCOND, tiny_diffusion.IDS_COND]
    first = _run(pipe, rows)   # pipeline.json: euler, 4 steps, guidance 3, seed 7
    np.testing.assert_allclose(first, ort_reference(bundle, "euler_discrete", 4, 3.0, tiny_diffusion.SEED, rows),
                               rtol=0, atol=ORT_TOLERANCE)
    assert np.array_equal(first, _run(pipe, rows, seed=tiny_diffusion.SEED))
    assert np.abs(first - _run(pipe, rows, seed=8)).max() > 1e-3


def _copy(bundle, tmp_path, edit):
    for f in ("text_encoder.onnx", "unet.onnx", "vae_decoder.onnx"):
        shutil.copy(bundle / f, tmp_path / f)
    shutil.copytree(bundle / "scheduler", tmp_path / "scheduler")
    doc = json.loads((bundle / "pipeline.json").read_text())
    edit(doc)
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))
    return tmp_path


def test_guidance_as_two_calls_when_the_denoiser_batch_is_fixed_to_one(bundle, tmp_path):
    model = onnx.load(str(bundle / "unet.onnx"))
    for value in list(model.graph.input) + list(model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_value = 1
    folder = _copy(bundle, tmp_path, lambda doc: None)
    onnx.save(model, str(folder / "unet.onnx"))
    pipe = onnxpipe.load(folder)
    rows = [tiny_diffusion.IDS_UNCOND, tiny_diffusion.IDS_COND]
    image = _run(pipe, rows, num_steps=3, guidance_scale=5.0, seed=3)
    np.testing.assert_allclose(image, ort_reference(folder, "euler_discrete", 3, 5.0, 3, rows), rtol=0,
                               atol=ORT_TOLERANCE)
    batched = _run(onnxpipe.load(bundle), rows, num_steps=3, guidance_scale=5.0, seed=3)
    np.testing.assert_allclose(image, batched, rtol=0, atol=ORT_TOLERANCE)


def test_prompt_embeddings_as_a_pipeline_input(bundle, tmp_path):
    def edit(doc):
        doc["pipeline"]["flow"] = doc["pipeline"]["flow"][1:]
        del doc["pipeline"]["sessions"]["text_encoder"]
        doc["pipeline"]["dataflow"] = [{"from": "inputs.prompt_embeds", "to": "unet.encoder_hidden_states"}]
        doc["generation"]["scheduler"] = "ddim"
        doc["generation"]["denoising"]["scheduler_config"] = dict(tiny_diffusion.SCHEDULER, clip_sample=False)
    pipe = onnxpipe.load(_copy(bundle, tmp_path, edit))
    rows = [tiny_diffusion.IDS_UNCOND, tiny_diffusion.IDS_COND]
    text = ort.InferenceSession(str(bundle / "text_encoder.onnx"), providers=["CPUExecutionProvider"])
    emb = text.run(None, {"input_ids": np.array(rows, np.int64)})[0]
    result = pipe.run({"prompt_embeds": emb}, num_steps=3)
    values, shape = result.read("output")
    sched_settings = dict(tiny_diffusion.SCHEDULER, clip_sample=False)
    original = tiny_diffusion.SCHEDULER
    try:
        tiny_diffusion.SCHEDULER = sched_settings
        want = ort_reference(bundle, "ddim", 3, 3.0, tiny_diffusion.SEED, rows)
    finally:
        tiny_diffusion.SCHEDULER = original
    np.testing.assert_allclose(np.array(values).reshape(shape), want, rtol=0, atol=ORT_TOLERANCE)
    assert pipe.backend.shape(result.outputs["latents"]) == tuple(tiny_diffusion.LATENT_SHAPE)
    with pytest.raises(InputError, match=r'"encoder_hidden_states" .* batch 1; guidance_scale 3 needs 2'):
        pipe.run({"prompt_embeds": emb[1:]})
    with pytest.raises(InputError, match="needs input"):
        pipe.run()


def test_per_call_options_are_checked(pipe):
    rows = [tiny_diffusion.IDS_UNCOND, tiny_diffusion.IDS_COND]
    for options, message in (({"num_steps": 0}, "num_steps: expected an integer >= 1"),
                             ({"seed": "x"}, "seed: expected an integer"),
                             ({"scheduler": "lms"}, '"lms" is not one of euler_discrete, ddim'),
                             ({"guidance_scale": "high"}, "guidance_scale: expected a number")):
        with pytest.raises(InputError, match=message):
            pipe.run({"input_ids": _ids(rows)}, **options)
    with pytest.raises(InputError, match='loop is "denoising": use'):
        pipe.generate(input_ids=[1, 2])


@pytest.mark.parametrize("edit,path,message", [
    (lambda d: d["generation"].pop("denoising"), "$.generation.denoising", 'needs "denoising"'),
    (lambda d: d["generation"].update(num_steps=0), "$.generation.num_steps", "num_steps >= 1"),
    (lambda d: d["generation"].update(scheduler="pndm"), "$.generation.scheduler", "Valid options: euler_discrete, ddim"),
    (lambda d: d["generation"]["denoising"].update(latent_shape=[1, 4, 9, 8]), "$.generation.denoising.latent_shape",
     "does not fit"),
    (lambda d: d["generation"]["denoising"].update(timestep_input="t"), "$.pipeline.dataflow",
     'input "timestep" of session "unet" is fed by nothing'),
    (lambda d: d["pipeline"]["dataflow"].append({"from": "inputs.latent_sample", "to": "unet.sample"}),
     "$.generation.denoising.latent_input", 'input "sample" feeds no session of the step phase'),
    (lambda d: (d["generation"]["denoising"].update(final_input=None),   # the seed's section 12.3 wire
                d["pipeline"]["dataflow"].append({"from": "unet.out_sample", "to": "vae_decoder.latent_sample"})),
     "$.generation.denoising.final_input", "the flow has a final phase"),
    (lambda d: d["generation"]["denoising"].update(scheduler_config={"clip_sample": True}),
     "$.generation.denoising.scheduler_config.clip_sample", 'unknown setting "clip_sample"'),
    (lambda d: d["generation"]["denoising"].update(scheduler_config="missing.json"),
     "$.generation.denoising.scheduler_config", 'file "missing.json" does not exist'),
    (lambda d: d["generation"]["denoising"].update(colour="red"), "$.generation.denoising.colour", 'unknown key "colour"'),
    (lambda d: d["generation"].update(loop="single_pass"), "$.generation.denoising", 'is for generation.loop "denoising"'),
])
def test_config_errors_name_the_json_path(bundle, tmp_path, edit, path, message):
    folder = _copy(bundle, tmp_path, edit)
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(folder)
    assert err.value.path == path and message in str(err.value) and "pipeline.json" in str(err.value)


def test_errors_inside_the_scheduler_file_name_that_file(bundle, tmp_path):
    folder = _copy(bundle, tmp_path, lambda doc: None)
    settings = json.loads((folder / "scheduler" / "scheduler_config.json").read_text())
    settings["use_karras_sigmas"] = True
    (folder / "scheduler" / "scheduler_config.json").write_text(json.dumps(settings))
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(folder)
    assert err.value.path == "$.use_karras_sigmas" and "scheduler_config.json" in str(err.value)


def test_the_noise_is_standard_normal_and_counter_based():
    values = normal(5, 20001)
    assert abs(np.mean(values)) < 0.03 and abs(np.std(values) - 1) < 0.03
    assert normal(5, 7) == values[:7] and normal(6, 7) != values[:7]
    assert initial_latents(5, 4, 2.0) == [2 * v for v in values[:4]]
