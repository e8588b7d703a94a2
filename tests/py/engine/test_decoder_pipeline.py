"""onnxruntime-genai decoder-pipeline bundles, and the flow key ``on`` that runs their stages.

genai_pipeline (tests/fixtures/genai_stages.py) is the builder's tiny llama cut into stages:
embeddings, two layers that each own their KV cache, a prompt-only and a token-only lm head
that differ, so its tokens (onnxruntime-genai's, the oracle) tell which head ran on which pass.
"""

from __future__ import annotations

import json
import shutil

import pytest

import onnxpipe
from onnxpipe.config import genai_v1
from onnxpipe.errors import ConfigError
from tests.agreement import FP32_KERNELS
from tests.fixtures import tiny_models


@pytest.fixture(scope="module")
def staged():
    return tiny_models.ensure("genai_pipeline")


def _greedy(bundle, expected):
    return onnxpipe.load(bundle).generate(input_ids=expected["input_ids"], do_sample=False, ignore_eos=True,
                                          max_new_tokens=expected["max_new_tokens"])


def _copy(staged, tmp_path):
    out = tmp_path / "bundle"
    shutil.copytree(staged, out)
    return out, json.loads((out / "genai_config.json").read_text())


def test_greedy_tokens_equal_onnxruntime_genai(staged):
    expected = tiny_models.load_expected(staged)
    assert expected["min_logit_margin"] >= 2 * FP32_KERNELS   # decisive: the margin rule leaves no step open
    pipe = onnxpipe.load(staged)
    assert [(s.run, s.on) for s in pipe.spec.pipeline.flow] == [
        ("embeddings", "any"), ("layer_0", "any"), ("layer_1", "any"), ("lm_head", "prompt"),
        ("lm_head_token", "token_gen")]
    result = _greedy(staged, expected)
    assert result.tokens == expected["greedy_tokens"]
    assert result.finish_reason == "length"


def test_prompt_and_token_variants_of_a_layer_share_its_kv_cache(staged, tmp_path):
    # as onnxruntime-genai's QNN bundles do: one file for prompts, one for single tokens, one cache;
    # both variants compute the same function here, so the tokens stay the oracle's
    out, cfg = _copy(staged, tmp_path)
    stages = cfg["model"]["decoder"]["pipeline"]
    layer = stages[2]["layer_1"]
    stages[2] = {"layer_1": dict(layer, run_on_token_gen=False)}
    stages.insert(3, {"layer_1_token": dict(layer, run_on_prompt=False)})
    (out / "genai_config.json").write_text(json.dumps(cfg))
    expected = tiny_models.load_expected(staged)
    assert _greedy(out, expected).tokens == expected["greedy_tokens"]


def _v2(staged, tmp_path, edit):
    """The fixture as a pipeline.json v2 bundle, ``edit``ed."""
    out, cfg = _copy(staged, tmp_path)
    doc = genai_v1.translate(cfg)
    edit(doc)
    (out / "pipeline.json").write_text(json.dumps(doc))
    return out


def _refused(bundle, path, *words):
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(bundle)
    assert info.value.path == path
    for word in words:
        assert word in str(info.value)


def test_on_outside_the_step_phase_is_refused(staged, tmp_path):
    def edit(doc):
        doc["pipeline"]["flow"][0].update(when="init", on="prompt")
    _refused(_v2(staged, tmp_path, edit), "$.pipeline.flow[0].on", '"on": "prompt"', "init phase")


def test_on_needs_the_autoregressive_loop(staged, tmp_path):
    def edit(doc):
        doc["generation"]["loop"] = "single_pass"
    _refused(_v2(staged, tmp_path, edit), "$.pipeline.flow[3].on", "autoregressive", '"single_pass"')


def test_a_value_missing_on_some_passes_is_refused_at_load(staged, tmp_path):
    def edit(doc):   # logits only on prompt passes: nothing for the loop to read when generating
        del doc["pipeline"]["sessions"]["lm_head_token"]
        doc["pipeline"]["flow"].pop()
    _refused(_v2(staged, tmp_path, edit), "$.pipeline.flow", 'the loop\'s "logits"', '"lm_head" (on prompt)',
             "token_gen passes")


def test_unknown_on_value_names_the_choices(staged, tmp_path):
    def edit(doc):
        doc["pipeline"]["flow"][3]["on"] = "prefill"
    _refused(_v2(staged, tmp_path, edit), "$.pipeline.flow[3].on", "prefill", "token_gen")
