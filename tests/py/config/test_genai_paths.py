"""A genai bundle's errors name genai_config.json and the JSON path in THAT file.

Checks after the translation (validation, ranges, KV discovery, session files, token ids) see
onnxpipe's translated document; config/genai_paths.py tells their errors in the user's file,
keeping onnxpipe's own path in the message. On a copy of genai_qwen2_padout (builder output).
"""

from __future__ import annotations

import json
import os

import pytest

import onnxpipe
from onnxpipe.config.genai_paths import source_path
from onnxpipe.errors import ConfigError
from tests.fixtures import tiny_models

FILES = ("model.onnx", "model.onnx.data", "tokenizer.json", "tokenizer_config.json")


def _bundle(tmp_path, edit):
    source = tiny_models.ensure("genai_qwen2_padout")
    folder = tmp_path / "b"
    folder.mkdir()
    for name in FILES:
        os.symlink(source / name, folder / name)
    config = json.loads((source / "genai_config.json").read_text())
    edit(config)
    (folder / "genai_config.json").write_text(json.dumps(config))
    return folder


def _set(where: str, value):
    def edit(config):
        *keys, last = where.split(".")
        node = config
        for key in keys:
            node = node[key]
        node[last] = value
    return edit


@pytest.mark.parametrize("where, value, path, text, translated", [
    ("model.decoder.inputs.past_key_names", 7, "$.model.decoder.inputs.past_key_names",
     'expected a tensor name pattern (a string with "%d" for the layer), found integer 7', None),
    ("model.decoder.inputs.past_key_names", "past.%d.k", "$.model.decoder.inputs.past_key_names",
     "no step-phase session has an input matching its past patterns", "$.pipeline.state.kv_cache"),
    ("search.temperature", -1, "$.search.temperature", "temperature must be >= 0",
     "$.generation.sampling.temperature"),
    ("search.top_k", "x", "$.search.top_k", 'expected an integer, found string "x"', "$.generation.sampling.top_k"),
    ("model.decoder.filename", "decoder.onnx", "$.model.decoder.filename", 'file "decoder.onnx" does not exist',
     "$.pipeline.sessions.decoder.file"),
    ("model.decoder.num_key_value_heads", 3, "$.model.decoder.num_key_value_heads", "3",
     "$.pipeline.state.kv_cache.num_heads"),
])
def test_errors_after_the_translation_name_the_key_in_genai_config(tmp_path, where, value, path, text, translated):
    folder = _bundle(tmp_path, _set(where, value))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(folder)
    exc = info.value
    assert (exc.file, exc.path) == (str(folder / "genai_config.json"), path), exc
    assert text in exc.detail
    if translated:
        assert f"(onnxpipe's translation of this key: {translated})" in exc.detail


def test_a_token_id_refused_when_fed_names_the_genai_key(tmp_path):
    pipe = onnxpipe.load(_bundle(tmp_path, _set("model.bos_token_id", 384)))   # loads: bos is fed only here
    with pytest.raises(ConfigError) as info:
        pipe.generate(max_new_tokens=2)
    assert info.value.path == "$.model.bos_token_id" and info.value.file.endswith("genai_config.json")
    assert "ids [384] are outside the vocabulary (0..383)" in info.value.detail


@pytest.mark.parametrize("path, search, want", [
    ("$.generation.max_length", {"max_length": 64}, "$.search.max_length"),
    ("$.generation.max_length", {}, "$.model.context_length"),
    ("$.generation.sampling.top_p", {}, "$.search.top_p"),
    ("$.tokens.eos[1]", {}, "$.model.eos_token_id"),
    ("$.pipeline.sessions.decoder.session_options.intra_op_num_threads", {},
     "$.model.decoder.session_options.intra_op_num_threads"),
    ("$.pipeline.state.kv_cache.sliding_window.window_size", {}, "$.model.decoder.sliding_window.window_size"),
    ("$.pipeline.flow[0].run", {}, "$.model.decoder"),
    ("$.model.decoder.filename", {}, None),   # already the user's file
])
def test_source_paths(path, search, want):
    assert source_path(path, {"model": {"type": "qwen2"}, "search": search}) == want
    assert source_path("$.pipeline.state.kv_cache", {"model": {"type": "gpt2"}}) == "$.model.decoder.inputs.past_names"


@pytest.mark.parametrize("path, want", [
    ("$.pipeline.sessions.vision.file", "$.model.vision.filename"),
    ("$.pipeline.sessions.embedding", "$.model.embedding"),
    ("$.pipeline.sessions.encoder.file", "$.model.encoder.filename"),
    ("$.preprocessing.audio.log_mel.n_fft", "$.model.speech.config_filename"),
    ("$.pipeline.sessions.layer_1.file", "$.model.decoder.pipeline[1].layer_1.filename"),
    ("$.pipeline.sessions.layer_1.session_options.log_severity_level",
     "$.model.decoder.pipeline[1].layer_1.session_options.log_severity_level"),
    ("$.pipeline.sessions.lm_head", "$.model.decoder.pipeline[2].lm_head"),
])
def test_source_paths_of_other_sections(path, want):
    genai = {"model": {"type": "decoder-pipeline", "decoder": {"pipeline": [
        {"embeddings": {"filename": "e.onnx"}}, {"layer_1": {"filename": "l.onnx"}},
        {"lm_head": {"filename": "h.onnx"}}]}}}
    assert source_path(path, genai) == want


def test_a_missing_stage_file_is_told_at_the_stage(tmp_path):
    import shutil
    from onnxpipe.config.genai_pipeline import _stages
    bundle = tmp_path / "b"
    shutil.copytree(tiny_models.ensure("genai_pipeline"), bundle)
    config = json.loads((bundle / "genai_config.json").read_text())
    name, where, stage = _stages(config["model"]["decoder"]["pipeline"], "genai_config.json")[1]
    (bundle / stage["filename"]).unlink()
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(bundle)
    assert info.value.file.endswith("genai_config.json")
    assert info.value.path == f"{where}.filename"


@pytest.mark.parametrize("path, want", [
    ("$.pipeline.state.recurrent[0].layers", "$.model.decoder.layer_types"),
    ("$.pipeline.state.recurrent[0].shape", "$.model.decoder.conv_cache_size"),
    ("$.pipeline.state.recurrent[1].input", "$.model.decoder.inputs.past_recurrent_names"),
    ("$.pipeline.state.recurrent[1].shape", "$.model.decoder.inputs.past_recurrent_names"),
    ("$.pipeline.state.recurrent[1]", "$.model.decoder.inputs.past_recurrent_names"),
])
def test_source_paths_of_hybrid_state(path, want):
    genai = {"model": {"type": "qwen3_5_text", "decoder": {
        "layer_types": ["linear_attention", "full_attention"], "conv_cache_size": 3}}}
    assert source_path(path, genai) == want


def test_a_conv_window_the_graph_does_not_have_is_told_at_conv_cache_size(tmp_path):
    import shutil
    bundle = tmp_path / "b"
    shutil.copytree(tiny_models.ensure("genai_lfm2"), bundle)
    config = json.loads((bundle / "genai_config.json").read_text())
    config["model"]["decoder"]["conv_cache_size"] += 1
    (bundle / "genai_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(bundle)
    assert info.value.file.endswith("genai_config.json")
    assert info.value.path == "$.model.decoder.conv_cache_size"
    assert "$.pipeline.state.recurrent[0].shape" in info.value.message   # onnxpipe's own path, kept
