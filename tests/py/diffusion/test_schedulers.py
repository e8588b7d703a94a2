"""Schedulers step by step against diffusers' own (timesteps, sigmas, every step's latents).

The update runs as onnxpipe's step graph on onnxruntime; diffusers' scheduler gets the same
latents and the same model outputs (random, seeded), with and without classifier-free guidance
(batched, and as two outputs).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from diffusers import DDIMScheduler, EulerDiscreteScheduler

from onnxpipe.diffusion import SCHEDULERS, input_graph, make_scheduler
from onnxpipe.errors import ConfigError

SHAPE = (1, 4, 8, 8)
SD = {"beta_schedule": "scaled_linear", "beta_start": 0.00085, "beta_end": 0.012, "steps_offset": 1}

CASES = [
    ("euler_discrete", {}, 10),                                           # diffusers' defaults
    ("euler_discrete", SD, 7),
    ("euler_discrete", dict(SD, timestep_spacing="leading"), 6),
    ("euler_discrete", dict(SD, timestep_spacing="trailing", prediction_type="v_prediction"), 5),
    ("euler_discrete", {"num_train_timesteps": 500, "final_sigmas_type": "sigma_min",
                        "prediction_type": "sample", "beta_schedule": "squaredcos_cap_v2"}, 4),
    ("ddim", {}, 10),                                                     # clip_sample on
    ("ddim", dict(SD, clip_sample=False, set_alpha_to_one=False), 7),
    ("ddim", dict(SD, clip_sample=False, timestep_spacing="trailing", prediction_type="v_prediction"), 5),
    ("ddim", {"timestep_spacing": "linspace", "prediction_type": "sample", "clip_sample_range": 0.5}, 6),
]
DIFFUSERS = {"euler_discrete": EulerDiscreteScheduler, "ddim": DDIMScheduler}


def _run(model: bytes, feeds: dict) -> np.ndarray:
    onnx.checker.check_model(onnx.load_from_string(model))
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _tolerance(reference: torch.Tensor) -> float:
    """1e-5, or 1e-6 of the largest value once that passes 10: float32 keeps ~7 digits, and
    diffusers' Euler with its default linear betas starts at sigma 157."""
    return max(1e-5, 1e-6 * float(reference.abs().max()))


@pytest.mark.parametrize("name,settings,steps", CASES)
def test_plan_matches_diffusers(name, settings, steps):
    ours = make_scheduler(name, settings).plan(steps)
    ref = DIFFUSERS[name](**settings)
    ref.set_timesteps(steps)
    np.testing.assert_allclose(ours.timesteps, ref.timesteps.double().numpy(), rtol=0, atol=1e-3)
    np.testing.assert_allclose(ours.init_noise_sigma, float(ref.init_noise_sigma), rtol=1e-6)
    if name == "euler_discrete":
        np.testing.assert_allclose(ours.sigmas, ref.sigmas.double().numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("guidance", ["none", "batched", "two_calls"])
@pytest.mark.parametrize("name,settings,steps", CASES)
def test_every_step_matches_diffusers(name, settings, steps, guidance):
    rng = np.random.default_rng(len(name) + steps)
    ours = make_scheduler(name, settings)
    plan = ours.plan(steps)
    graph = ours.step_graph(guidance)
    scale_in = input_graph(guidance == "batched")
    ref = DIFFUSERS[name](**settings)
    ref.set_timesteps(steps)
    noise = rng.standard_normal(SHAPE).astype(np.float32)
    x = (noise * plan.init_noise_sigma).astype(np.float32)
    x_ref = torch.from_numpy(x.copy())
    scale = np.array(5.5, np.float32)
    for i, (t, divisor, coeffs) in enumerate(plan.steps):
        t_ref = ref.timesteps[i]
        assert float(t_ref) == pytest.approx(t, abs=1e-3)
        pair = torch.cat([x_ref] * 2) if guidance == "batched" else x_ref
        model_in_ref = ref.scale_model_input(pair, t_ref)
        model_in = _run(scale_in, {"x": x, "d": np.array(divisor, np.float32)})
        np.testing.assert_allclose(model_in, model_in_ref.numpy(), rtol=0, atol=_tolerance(model_in_ref))
        rows = 2 if guidance != "none" else 1
        # a model that mostly finds the noise it was given, so the latents stay in range
        pred = (0.9 * noise + 0.1 * rng.standard_normal((rows,) + SHAPE[1:])).astype(np.float32)
        feeds = {"x": x, "c": np.array(coeffs, np.float32)}
        if guidance == "none":
            feeds["m"] = pred
            m_ref = torch.from_numpy(pred)
        else:
            feeds["g"] = scale
            if guidance == "batched":
                feeds["m"] = pred
            else:
                feeds["m_uncond"], feeds["m_cond"] = pred[:1], pred[1:]
            uncond, cond = torch.from_numpy(pred).chunk(2)
            m_ref = uncond + float(scale) * (cond - uncond)
        x = _run(graph, feeds)
        x_ref = ref.step(m_ref, t_ref, x_ref).prev_sample
        np.testing.assert_allclose(x, x_ref.numpy(), rtol=0, atol=_tolerance(x_ref), err_msg=f"step {i}")
    assert np.abs(x).max() > 0.1   # the latents did not collapse to nothing


def test_diffusers_scheduler_config_files_load_as_shipped():
    euler = EulerDiscreteScheduler(**SD)
    config = dict(euler.config)   # what save_config writes, _class_name and version included
    config["_class_name"], config["_diffusers_version"] = "EulerDiscreteScheduler", "0.42.1"
    assert make_scheduler(None, config).name == "euler_discrete"
    ddim = dict(DDIMScheduler().config, _class_name="DDIMScheduler")
    assert make_scheduler("ddim", ddim).settings["clip_sample"] is True


@pytest.mark.parametrize("name,settings,path,message", [
    ("ddim", {"skip_prk_steps": True}, "scheduler_config.skip_prk_steps", 'unknown setting "skip_prk_steps"'),
    ("euler_discrete", {"use_karras_sigmas": True}, "scheduler_config.use_karras_sigmas", "not supported"),
    ("euler_discrete", {"interpolation_type": "log_linear"}, "interpolation_type", "not supported"),
    ("ddim", {"thresholding": True}, "thresholding", "not supported"),
    ("ddim", {"prediction_type": "flow"}, "prediction_type", "supported: 'epsilon'"),
    ("ddim", {"num_train_timesteps": "1000"}, "num_train_timesteps", "expected an integer"),
    # the schedule is a list num_train_timesteps long: bounded before it is made
    ("ddim", {"num_train_timesteps": 10 ** 9}, "num_train_timesteps", "expected num_train_timesteps <= 100000"),
    ("euler_discrete", {"beta_end": float("nan")}, "beta_end", "expected a finite number"),
    ("ddim", {"_class_name": "EulerDiscreteScheduler"}, "_class_name", 'the scheduler is "ddim"'),
    ("euler_discrete", {"trained_betas": [0.1, 0.2]}, "trained_betas", "num_train_timesteps is 1000"),
    ("lms", {}, "$.generation.scheduler", "euler_discrete, ddim"),
    (None, {}, "$.generation.scheduler", '"_class_name"'),
])
def test_bad_settings_are_refused_with_their_path(name, settings, path, message):
    with pytest.raises(ConfigError) as err:
        make_scheduler(name, settings)
    assert path in err.value.path and message in str(err.value)


def test_registry():
    assert set(SCHEDULERS) == {"euler_discrete", "ddim"}
    for name, cls in SCHEDULERS.items():
        assert cls.name == name and cls.diffusers_class in DIFFUSERS[name].__name__
