"""transformers.js folders (tjs_* fixtures) run unchanged: no pipeline.json, no code per model.

References are computed here, at test time: transformers `generate` on the same random-weight
model (rebuilt from its seed) for fp32, under the margin rule; onnxruntime run directly on the
very file for every other dtype (same file, same engine, same feeds: equal by construction).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import onnxpipe
from onnxpipe import cli
from tests.agreement import FP32_KERNELS, assert_greedy_agrees, margins
from tests.fixtures import TJS_BUNDLES, tiny_models
from tests.fixtures.tjs_folders import SPECS, ort_greedy

VARIANTS = [(n, d) for n in TJS_BUNDLES for d in SPECS[n]["dtypes"] if d != "fp32"]


def transformers_reference(name: str, prompt: list[int], steps: int) -> tuple[list[int], list[float]]:
    """Greedy tokens and per-step margins from transformers on the fixture's model."""
    import torch

    from tests.fixtures.hf_decoders import _random_model

    model_spec = {k: v for k, v in SPECS[name].items() if k not in ("dtypes", "merged", "external_data", "text_only")}
    model = _random_model(model_spec)
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=steps, do_sample=False, pad_token_id=0,
                             output_logits=True, return_dict_in_generate=True)
    logits = np.stack([step[0].float().numpy() for step in out.logits])
    return out.sequences[0, len(prompt):].tolist(), margins(logits)


def run(bundle, exp, **load):
    pipe = onnxpipe.load(bundle, **load)
    return pipe.generate(input_ids=exp["input_ids"], max_new_tokens=exp["max_new_tokens"], do_sample=False,
                         ignore_eos=True)


@pytest.mark.parametrize("name", TJS_BUNDLES)
def test_fp32_equals_transformers(name):
    bundle = tiny_models.ensure(name)
    exp = tiny_models.load_expected(bundle)
    want, want_margins = transformers_reference(name, exp["input_ids"], exp["max_new_tokens"])
    result = run(bundle, exp)             # no dtype: cpu opens fp32
    assert result.finish_reason == "length"
    assert_greedy_agrees(result.tokens, want, want_margins, FP32_KERNELS, f"{name} fp32")
    assert len(result.tokens) == len(want)


@pytest.mark.parametrize("name,dtype", VARIANTS)
def test_variant_equals_onnxruntime_on_the_same_file(name, dtype):
    bundle = tiny_models.ensure(name)
    exp = tiny_models.load_expected(bundle)
    file = exp["variants"][dtype]["file"]
    want, _ = ort_greedy(bundle / file, exp["input_ids"], exp["max_new_tokens"])
    pipe = onnxpipe.load(bundle, dtype=dtype)
    assert pipe.config.dtype == dtype
    result = pipe.generate(input_ids=exp["input_ids"], max_new_tokens=exp["max_new_tokens"], do_sample=False,
                           ignore_eos=True)
    assert result.tokens == want


def test_unknown_model_type_runs(tmp_path):
    bundle = tmp_path / "novel"
    shutil.copytree(tiny_models.ensure("tjs_llama"), bundle)
    config = json.loads((bundle / "config.json").read_text())
    config["model_type"] = "an_architecture_nobody_registered"
    (bundle / "config.json").write_text(json.dumps(config))
    exp = tiny_models.load_expected(bundle)
    result = run(bundle, exp)
    assert result.tokens == exp["greedy_tokens"]
    assert onnxpipe.load(bundle, text=False).spec.metadata["model_type"] == config["model_type"]


def test_chat_template_from_the_folder():
    from transformers import AutoTokenizer

    bundle = tiny_models.ensure("tjs_qwen3_merged")
    messages = [{"role": "system", "content": "be"}, {"role": "user", "content": "hi"}]
    want = AutoTokenizer.from_pretrained(str(bundle)).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    pipe = onnxpipe.load(bundle)
    assert pipe.chat_prompt_ids(messages) == list(want)
    assert len(want) < pipe.spec.generation.max_length   # the fixture's context: prompt + 64
    assert len(pipe.chat(messages, max_new_tokens=2).tokens) == 2


@pytest.mark.parametrize("dtype", [None, "fp16"])
def test_convert_round_trip(tmp_path, capsys, dtype):
    name = "tjs_qwen2"
    bundle = tmp_path / name
    shutil.copytree(tiny_models.ensure(name), bundle)
    exp = tiny_models.load_expected(bundle)
    before = run(bundle, exp, **({"dtype": dtype} if dtype else {})).tokens
    args = ["convert", str(bundle)] + (["--dtype", dtype] if dtype else [])
    assert cli.main(args) == 0
    written = json.loads((bundle / "pipeline.json").read_text())
    assert written["version"] == 2
    assert cli.main(args) == 2                       # refuses to overwrite without --force
    assert "--force" in capsys.readouterr().err
    pipe = onnxpipe.load(bundle)                     # now read from pipeline.json
    assert pipe.config.file == str(bundle / "pipeline.json")
    result = pipe.generate(input_ids=exp["input_ids"], max_new_tokens=exp["max_new_tokens"], do_sample=False,
                           ignore_eos=True)
    assert result.tokens == before
    want = exp["greedy_tokens"] if dtype is None else ort_greedy(bundle / exp["variants"][dtype]["file"],
                                                                 exp["input_ids"])[0]
    assert result.tokens == want


def test_convert_refuses_other_bundles(torch_llama, capsys):
    assert cli.main(["convert", str(torch_llama)]) == 2
    assert "not a transformers.js folder" in capsys.readouterr().err
