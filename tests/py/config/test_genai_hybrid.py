"""Hybrid decoders in onnxruntime-genai bundles (LFM2: conv + attention layers; Qwen3.5: Gated
DeltaNet conv + recurrent state + attention) and transformers.js folders (LFM2): translation,
chat continuation, refusals."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

import onnxpipe
from onnxpipe.config import genai_v1
from onnxpipe.config import transformers_js as tjs
from onnxpipe.errors import ConfigError, InputError
from tests.agreement import FP32_KERNELS, LogitsProbe, assert_greedy_agrees, margins
from tests.fixtures import tiny_models

LFM2 = {"model": {"type": "lfm2", "eos_token_id": 3, "decoder": {
    "filename": "model.onnx", "num_hidden_layers": 4, "hidden_size": 64, "head_size": 16,
    "layer_types": ["conv", "full_attention", "conv", "full_attention"], "conv_cache_size": 2,
    "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
               "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value",
               "past_conv_names": "past.%d.conv"},
    "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                "present_value_names": "present.%d.value", "present_conv_names": "present.%d.conv"}}}}


def lfm2(**decoder):
    g = copy.deepcopy(LFM2)
    g["model"]["decoder"].update(decoder)
    return g


def test_conv_layers_become_one_recurrent_entry():
    state = genai_v1.translate(LFM2)["pipeline"]["state"]
    assert state["recurrent"] == [{"input": "past.{layer}.conv", "output": "present.{layer}.conv",
                                   "checkpoints": 4, "layers": [0, 2], "shape": [1, 64, 2]}]


def test_recurrent_names_become_a_second_entry():
    g = lfm2(layer_types=None, conv_cache_size=None, hidden_size=None)
    g["model"]["decoder"]["inputs"]["past_recurrent_names"] = "past.%d.recurrent"
    g["model"]["decoder"]["outputs"]["present_recurrent_names"] = "present.%d.recurrent"
    state = genai_v1.translate(g)["pipeline"]["state"]
    assert [(e["input"], e["output"]) for e in state["recurrent"]] == [
        ("past.{layer}.conv", "present.{layer}.conv"), ("past.{layer}.recurrent", "present.{layer}.recurrent")]


def _without(key):
    g = copy.deepcopy(LFM2)
    del g["model"]["decoder"]["outputs"][key]
    return g


@pytest.mark.parametrize("g, path, message", [
    (lfm2(conv_cache_size=0), "$.model.decoder.conv_cache_size",
     "expected a positive integer (the convolution window), found integer 0"),
    (lfm2(layer_types=["conv", "mamba", "conv", "full_attention"]), "$.model.decoder.layer_types[1]",
     'layer type "mamba" is not one onnxpipe runs'),
    (lfm2(layer_types=["conv", "full_attention"]), "$.model.decoder.layer_types",
     "2 layer types for num_hidden_layers 4"),
    (lfm2(conv_cache_size="2"), "$.model.decoder.conv_cache_size", 'found string "2"'),
])
def test_refusals_name_the_genai_key(g, path, message):
    with pytest.raises(ConfigError) as err:
        genai_v1.translate(g)
    assert err.value.file == "genai_config.json" and err.value.path == path and message in str(err.value)


# ---- the builder's bundles ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["genai_lfm2", "genai_qwen35", "tjs_lfm2", "tjs_qwen35"])
def test_a_chat_continues_the_state_as_a_fresh_prefill_would(name):
    bundle = tiny_models.ensure(name)
    prompt = tiny_models.load_expected(bundle)["input_ids"]
    pipe = onnxpipe.load(bundle)
    first = pipe.generate(input_ids=prompt, max_new_tokens=6, do_sample=False, ignore_eos=True).tokens
    # the next turn drops the last two tokens the state holds: a checkpointed length
    turn = prompt + first[:3] + [7, 9]
    new_ids = pipe.conversation.continue_from(turn)
    assert new_ids == [7, 9] and pipe.executor.length == len(prompt) + 3
    more = pipe.generation.collect(new_ids, len(turn), pipe.loaded.options({"do_sample": False}, 12))
    assert more.cached_tokens == len(prompt) + 3
    probe = LogitsProbe()
    fresh = onnxpipe.load(bundle, backend=probe).generate(input_ids=turn, max_new_tokens=12, do_sample=False,
                                                           ignore_eos=True)
    assert_greedy_agrees(more.tokens, fresh.tokens, margins(probe.step_logits()), FP32_KERNELS)
    # a cut inside the prefill can't be restored: the state starts over, same tokens
    again = pipe.conversation.continue_from(prompt[:4] + [7, 9])
    assert again == prompt[:4] + [7, 9] and pipe.executor.length == 0


def test_speculative_is_refused_with_the_reason(genai_qwen35):
    pipe = onnxpipe.load(genai_qwen35)
    with pytest.raises(InputError, match=r'speculative decoding drops the positions of rejected drafts, but '
                                         r'the recurrent state "past.0.conv", "past.2.conv" can\'t be cut back '
                                         r"to a position inside a run"):
        pipe.generate(input_ids=[1, 2, 3, 1, 2], max_new_tokens=4, do_sample=False,
                      speculative={"method": "prompt_lookup", "max_draft": 3})


def _v2(bundle, tmp_path, recurrent):
    """The builder's LFM2 graph under a hand-written pipeline.json."""
    folder = tmp_path / "lfm2"
    shutil.copytree(bundle, folder)
    (folder / "genai_config.json").unlink()
    doc = genai_v1.translate(json.loads((bundle / "genai_config.json").read_text()))
    doc["pipeline"]["state"].pop("recurrent")
    if recurrent is not None:
        doc["pipeline"]["state"]["recurrent"] = recurrent
    (folder / "pipeline.json").write_text(json.dumps(doc))
    return folder


def test_a_declaration_for_other_layers_is_refused(genai_lfm2, tmp_path):
    folder = _v2(genai_lfm2, tmp_path, [{"input": "past.{layer}.conv", "output": "present.{layer}.conv",
                                          "layers": [0, 1]}])
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(folder)
    assert err.value.path == "$.pipeline.state.recurrent[0].layers"
    assert 'layers [0, 1] declared, but session "decoder" has "past.{layer}.conv" inputs for layers [0, 2]' \
        in str(err.value)


def test_an_undeclared_conv_state_is_advised_into_state_recurrent(genai_lfm2, tmp_path):
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(_v2(genai_lfm2, tmp_path, None))
    assert err.value.path == "$.pipeline.state.recurrent"
    assert ('input "past.0.conv" of session "decoder" is fed by nothing; with its output "present.0.conv" '
            'it is a state carried step to step') in str(err.value)
    assert "input_ids" not in str(err.value)


def test_left_out_names_are_onnxruntime_genais_defaults():
    g = _without("present_conv_names")
    del g["model"]["decoder"]["inputs"]["past_conv_names"]
    g["model"]["decoder"]["layer_types"][0] = "linear_attention"
    recurrent = genai_v1.translate(g)["pipeline"]["state"]["recurrent"]
    assert [(e["input"], e["output"], e["layers"]) for e in recurrent] == [
        ("past_key_values.{layer}.conv_state", "present.{layer}.conv_state", [0, 2]),
        ("past_key_values.{layer}.recurrent_state", "present.{layer}.recurrent_state", [0])]


def test_layer_types_without_a_conv_state_are_left_alone():
    g = lfm2(layer_types=["sliding_attention", "chunked_attention", "full_attention", "full_attention"],
             conv_cache_size=None)
    del g["model"]["decoder"]["inputs"]["past_conv_names"], g["model"]["decoder"]["outputs"]["present_conv_names"]
    assert "recurrent" not in genai_v1.translate(g)["pipeline"]["state"]


# ---- transformers.js folders ----------------------------------------------------------------


def test_a_tjs_folder_declares_its_conv_layers(tmp_path):
    doc = tjs.translate(str(tiny_models.ensure("tjs_lfm2")))
    assert doc["pipeline"]["state"]["recurrent"] == [
        {"input": "past_conv.{layer}", "output": "present_conv.{layer}", "layers": [0, 2], "checkpoints": 4}]
    # Qwen3.5 style: layer_types under text_config, a conv and a recurrent state per linear layer
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5", "text_config": {
        "layer_types": ["linear_attention", "full_attention"] * 2}}))
    assert [(e["input"], e["layers"]) for e in tjs._hybrid_state(json.loads((tmp_path / "config.json").read_text()))] \
        == [("past_conv.{layer}", [0, 2]), ("past_recurrent.{layer}", [0, 2])]
