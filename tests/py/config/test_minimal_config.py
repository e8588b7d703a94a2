"""The seed's minimal pipeline.json (section 4.1, seven lines) next to an onnxruntime-genai
builder's model.onnx: no kv_cache.head_size, although the builder leaves the KV inputs' last dim
symbolic (kv_cache_dim). The runtime reads the graph for it (onnx_info), and the greedy tokens
are the fixture's, exactly (same file, same computation)."""

from __future__ import annotations

import json
import os

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError
from onnxpipe.state.kv_cache import KVCache
from tests.fixtures import tiny_models

BUILT = ("genai_llama", "genai_qwen2", "genai_qwen3")


def seed_config(eos: int) -> dict:
    """Section 4.1 of the seed as written, with this model's eos."""
    return {
        "version": 2,
        "pipeline": {"extends": "autoregressive-decoder", "sessions": {"decoder": {"file": "model.onnx"}}},
        "tokens": {"eos": [eos], "pad": 0},
        "generation": {"max_length": 4096, "sampling": {"temperature": 0.7}},
        "metadata": {"model_type": "qwen2", "source": "mobius"},
    }


def minimal_bundle(name: str, folder, **kv_cache) -> dict:
    """``folder`` with links to the fixture's model, weights and tokenizer, and the seven lines."""
    source = tiny_models.ensure(name)
    expected = tiny_models.load_expected(source)
    folder.mkdir(parents=True, exist_ok=True)
    for file in ("model.onnx", "model.onnx.data", "tokenizer.json", "tokenizer_config.json"):
        os.symlink(source / file, folder / file)
    config = seed_config(expected["eos_token_id"])
    if kv_cache:
        config["pipeline"]["state"] = {"kv_cache": kv_cache}
    (folder / "pipeline.json").write_text(json.dumps(config, indent=2))
    return expected


def kv_component(pipe):
    return next(c for c in pipe.executor.components if isinstance(c, KVCache))


@pytest.mark.parametrize("name", BUILT)
def test_seven_line_config_gives_the_fixture_tokens(name, tmp_path):
    expected = minimal_bundle(name, tmp_path / name)
    genai = json.loads((tiny_models.bundle_path(name) / "genai_config.json").read_text())["model"]["decoder"]
    pipe = onnxpipe.load(tmp_path / name)
    kv = kv_component(pipe)
    for slot in kv.slots:   # detected, and equal to what the builder was told
        assert slot.past.shape[-1] == "kv_cache_dim"
        assert kv._dims(slot)[1:] == [genai["num_key_value_heads"], -1, genai["head_size"]]
    result = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False, ignore_eos=True)
    assert result.tokens == expected["greedy_tokens"]


def test_given_dims_are_used_without_reading_the_graph(tmp_path):
    genai = json.loads((tiny_models.ensure("genai_llama") / "genai_config.json").read_text())["model"]["decoder"]
    expected = minimal_bundle("genai_llama", tmp_path / "b", num_heads=genai["num_key_value_heads"],
                              head_size=genai["head_size"])
    pipe = onnxpipe.load(tmp_path / "b")
    assert not kv_component(pipe)._graph.read   # never parsed
    result = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=4, do_sample=False, ignore_eos=True)
    assert result.tokens == expected["greedy_tokens"][:4]


def test_a_head_size_the_model_contradicts_is_an_error(tmp_path):
    """torch_llama fixes its KV dims ([batch, 2, past, 16]): kv_cache.head_size 8 is wrong."""
    source = tiny_models.ensure("torch_llama")
    folder = tmp_path / "b"
    folder.mkdir()
    for file in ("model.onnx", "tokenizer.json", "tokenizer_config.json"):
        os.symlink(source / file, folder / file)
    config = json.loads((source / "pipeline.json").read_text())
    config["pipeline"]["state"] = {"kv_cache": {"head_size": 8}}
    (folder / "pipeline.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(folder)
    exc = info.value
    assert exc.path == "$.pipeline.state.kv_cache.head_size"
    assert "8" in exc.detail and "16" in exc.detail and "past_key_values.0.key" in exc.detail
