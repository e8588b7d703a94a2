"""genai_config.json layouts beside the plain decoder: the "gpt2" type's combined past
(past_names / present_names, one [2, batch, heads, seq, head] tensor per layer) and the
``engine`` section (a paged KV cache refused with its key, static batching checked).

The combined-past model is built here: x = E[ids]; each layer appends stacked (x Wk, x Wv) to its
past along the sequence axis; h = x + mean over the cache of V (layer 0) - mean of K (layer 1);
logits = h W at every position, as onnxruntime-genai allocates them. Its tokens are
onnxruntime-genai's on the bundle and a numpy reference's (margin rule, tests/agreement.py).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_builders as ob
import onnxpipe
from onnxpipe.config import genai_v1
from onnxpipe.errors import ConfigError
from onnxpipe.state.kv_cache import KVCache
from tests.agreement import FP32_KERNELS, assert_greedy_agrees, margins

V, D = 41, 6
PROMPT = [1, 7, 3, 9]


def _gpt2_config(**decoder):
    return {"model": {"type": "gpt2", "context_length": 128, "vocab_size": V, "eos_token_id": 40,
                      "bos_token_id": 0, "pad_token_id": 40,
                      "decoder": {"filename": "model.onnx", "num_hidden_layers": 2, "num_key_value_heads": 1,
                                  "num_attention_heads": 1, "head_size": D, "hidden_size": D,
                                  "session_options": {"provider_options": []},
                                  "inputs": {"input_ids": "input_ids", "past_names": "past_%d"},
                                  "outputs": {"logits": "logits", "present_names": "present_%d"}, **decoder}},
            "search": {"max_length": 64, "do_sample": False}}


def _build(folder):
    rng = np.random.default_rng(1)
    E = rng.normal(size=(V, D)).astype(np.float32)
    Wk, Wv = (rng.normal(size=(D, D)).astype(np.float32) for _ in range(2))
    W = (rng.normal(size=(D, V)) * 4).astype(np.float32)
    c = lambda n, a: numpy_helper.from_array(np.asarray(a), n)  # noqa: E731
    n = helper.make_node
    nodes = [n("Gather", ["E", "input_ids"], ["x"]), n("MatMul", ["x", "Wk"], ["k"]), n("MatMul", ["x", "Wv"], ["v"]),
             n("Unsqueeze", ["k", "ax01"], ["k5"]), n("Unsqueeze", ["v", "ax01"], ["v5"]),
             n("Concat", ["k5", "v5"], ["kv"], axis=0)]                                  # [2, 1, 1, S, D]
    nodes += [n("Concat", [f"past_{i}", "kv"], [f"present_{i}"], axis=3) for i in range(2)]
    nodes += [n("Gather", ["present_0", "one"], ["v_all"], axis=0),
              n("ReduceMean", ["v_all"], ["v_mean"], axes=[2], keepdims=0),            # [1, 1, D]
              n("Gather", ["present_1", "zero"], ["k_all"], axis=0),
              n("ReduceMean", ["k_all"], ["k_mean"], axes=[2], keepdims=0),
              n("Add", ["x", "v_mean"], ["h0"]), n("Sub", ["h0", "k_mean"], ["h"]),
              n("MatMul", ["h", "W"], ["logits"])]                                       # [1, S, V]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    inputs += [helper.make_tensor_value_info(f"past_{i}", TensorProto.FLOAT, [2, "batch", 1, "past", D])
               for i in range(2)]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])]
    outputs += [helper.make_tensor_value_info(f"present_{i}", TensorProto.FLOAT, [2, "batch", 1, "total", D])
                for i in range(2)]
    inits = [c("E", E), c("Wk", Wk), c("Wv", Wv), c("W", W), c("ax01", np.array([0, 1], np.int64)),
             c("one", np.array(1, np.int64)), c("zero", np.array(0, np.int64))]
    ob.save_graph(helper.make_graph(nodes, "gpt2_combined", inputs, outputs, inits), folder / "model.onnx")
    (folder / "genai_config.json").write_text(json.dumps(_gpt2_config()))

    def reference(ids, steps):
        keys, values, out, feed, scores = [], [], [], list(ids), []
        for _ in range(steps):
            x = E[feed]
            keys += list(x @ Wk)
            values += list(x @ Wv)
            scores.append((x[-1] + np.mean(values, axis=0) - np.mean(keys, axis=0)) @ W)
            out.append(int(np.argmax(scores[-1])))
            feed = [out[-1]]
        return out, margins(scores)

    return reference


def _genai_greedy(folder, ids, steps):
    og = pytest.importorskip("onnxruntime_genai")
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + steps, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(np.array([ids], np.int32))
    tokens = []
    while not gen.is_done():
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
    return tokens


def test_combined_past_runs_and_gives_genai_tokens(tmp_path):
    reference = _build(tmp_path)
    pipe = onnxpipe.load(tmp_path, text=False)
    kv = [c for c in pipe.executor.components if isinstance(c, KVCache)]
    assert len(kv) == 1 and kv[0].format == "combined" and [s.past.name for s in kv[0].slots] == ["past_0", "past_1"]
    got = pipe.generate(input_ids=PROMPT, max_new_tokens=20).tokens
    assert_greedy_agrees(got, *reference(PROMPT, 20), FP32_KERNELS)
    assert got == _genai_greedy(tmp_path, PROMPT, 20)


def test_combined_past_translation():
    kv = genai_v1.translate(_gpt2_config())["pipeline"]["state"]["kv_cache"]
    assert (kv["format"], kv["past_pattern"], kv["present_pattern"]) == ("combined", "past_{layer}", "present_{layer}")
    other = _gpt2_config()
    other["model"]["type"] = "llama"   # onnxruntime-genai reads past_names only for gpt2
    assert genai_v1.translate(other)["pipeline"]["state"]["kv_cache"]["format"] == "separate"


@pytest.mark.parametrize("section, key, value, text", [
    ("inputs", "past_names", None, 'missing "past_names": onnxruntime-genai feeds a "gpt2" model a combined past'),
    ("outputs", "present_names", None, 'missing "present_names"'),
    ("inputs", "past_names", 3, 'expected a tensor name pattern (a string with "%d" for the layer, e.g. "past_%d"), found integer 3'),
    ("outputs", "present_names", "present", 'e.g. "present_%d"), found string "present"'),
])
def test_combined_past_names_are_checked(section, key, value, text):
    g = _gpt2_config()
    if value is None:
        del g["model"]["decoder"][section][key]
    else:
        g["model"]["decoder"][section][key] = value
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g)
    assert info.value.path == f"$.model.decoder.{section}.{key}" and info.value.file == "genai_config.json"
    assert text in info.value.detail


def _with_engine(engine):
    g = copy.deepcopy(_gpt2_config())
    g["engine"] = engine
    return g


def test_a_paged_kv_cache_is_refused_naming_the_block_size():
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(_with_engine({"dynamic_batching": {"block_size": 256, "max_batch_size": 16}}))
    assert info.value.path == "$.engine.dynamic_batching.block_size"
    assert ("a paged KV cache (onnxruntime-genai's continuous-batching engine: KV blocks of block_size=256 "
            "token slots shared by all sequences") in info.value.detail
    assert "head" not in info.value.detail.split("KV blocks")[1].split("PagedAttention")[0]
    with pytest.raises(ConfigError) as info:   # block_size left to its default
        genai_v1.translate(_with_engine({"dynamic_batching": {}}))
    assert info.value.path == "$.engine.dynamic_batching" and "block_size=256" in info.value.detail


def test_static_batching_is_checked_and_runs_as_an_ordinary_decoder():
    doc = genai_v1.translate(_with_engine({"static_batching": {"max_batch_size": 4}}))
    assert doc["pipeline"]["state"]["kv_cache"]["format"] == "combined"
    for engine, path, text in (({"static_batching": {"max_batch_size": 0}}, "$.engine.static_batching.max_batch_size",
                                "expected a positive integer, found integer 0"),
                               ({"static_batching": {"batch": 2}}, "$.engine.static_batching.batch", 'unknown key "batch"'),
                               ({"paged": {}}, "$.engine.paged", 'unknown key "paged"'),
                               ([], "$.engine", "expected an object")):
        with pytest.raises(ConfigError) as info:
            genai_v1.translate(_with_engine(engine))
        assert info.value.path == path and text in info.value.detail
