"""GPT-2 style combined KV cache (past_{layer} = stacked K and V) found from session I/O.

The model is written for this test: x = E[ids]; each layer appends stacked (x Wk, x Wv) to
its cache along the sequence axis; h = x_last + mean over the cache of V (layer 0) - mean of
K (layer 1); logits = h W. A numpy reference feeds it like any autoregressive runtime; tokens follow it under the margin
rule (tests/agreement.py).
"""

from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnx_builders as ob
import onnxpipe
from onnxpipe.state.kv_cache import KVCache
from tests.agreement import FP32_KERNELS, assert_greedy_agrees, margins

V, D = 41, 6


def build(tmp_path):
    rng = np.random.default_rng(1)
    E = rng.normal(size=(V, D)).astype(np.float32)
    Wk, Wv = (rng.normal(size=(D, D)).astype(np.float32) for _ in range(2))
    W = (rng.normal(size=(D, V)) * 4).astype(np.float32)
    c = lambda n, a: numpy_helper.from_array(np.asarray(a), n)  # noqa: E731
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["x"]),                      # [1, S, D]
        helper.make_node("MatMul", ["x", "Wk"], ["k"]), helper.make_node("MatMul", ["x", "Wv"], ["v"]),
        helper.make_node("Unsqueeze", ["k", "ax01"], ["k5"]), helper.make_node("Unsqueeze", ["v", "ax01"], ["v5"]),
        helper.make_node("Concat", ["k5", "v5"], ["kv"], axis=0),                   # [2, 1, 1, S, D]
    ]
    for layer in range(2):
        nodes.append(helper.make_node("Concat", [f"past_{layer}", "kv"], [f"present_{layer}"], axis=3))
    nodes += [
        helper.make_node("Gather", ["present_0", "one"], ["v_all"], axis=0),       # [1, 1, T, D]
        helper.make_node("ReduceMean", ["v_all"], ["v_mean"], axes=[2], keepdims=0),  # [1, 1, D]
        helper.make_node("Gather", ["present_1", "zero"], ["k_all"], axis=0),
        helper.make_node("ReduceMean", ["k_all"], ["k_mean"], axes=[2], keepdims=0),
        helper.make_node("Gather", ["x", "last"], ["x_last"], axis=1),             # [1, D]
        helper.make_node("Squeeze", ["v_mean", "ax1"], ["vm"]), helper.make_node("Squeeze", ["k_mean", "ax1"], ["km"]),
        helper.make_node("Add", ["x_last", "vm"], ["h0"]), helper.make_node("Sub", ["h0", "km"], ["h"]),
        helper.make_node("MatMul", ["h", "W"], ["logits"]),
    ]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    inputs += [helper.make_tensor_value_info(f"past_{i}", TensorProto.FLOAT, [2, "batch", 1, "past", D]) for i in range(2)]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", V])]
    outputs += [helper.make_tensor_value_info(f"present_{i}", TensorProto.FLOAT, [2, "batch", 1, "total", D]) for i in range(2)]
    inits = [c("E", E), c("Wk", Wk), c("Wv", Wv), c("W", W), c("ax01", np.array([0, 1], np.int64)),
             c("ax1", np.array([1], np.int64)), c("one", np.array(1, np.int64)),
             c("zero", np.array(0, np.int64)), c("last", np.array(-1, np.int64))]
    ob.save_graph(helper.make_graph(nodes, "combined", inputs, outputs, inits), tmp_path / "model.onnx")
    (tmp_path / "pipeline.json").write_text(json.dumps({
        "version": 2, "pipeline": {"extends": "autoregressive-decoder", "sessions": {"decoder": {"file": "model.onnx"}}},
        "tokens": {"eos": []}, "generation": {"max_length": 128}}))

    def reference(ids, n):
        keys, values, out, feed, scores = [], [], [], list(ids), []
        for _ in range(n):
            x = E[feed]
            keys += list(x @ Wk)
            values += list(x @ Wv)
            h = x[-1] + np.mean(values, axis=0) - np.mean(keys, axis=0)
            scores.append(h @ W)
            token = int(np.argmax(scores[-1]))
            out.append(token)
            feed = [token]
        return out, margins(scores)

    return reference


def test_combined_cache_is_discovered_and_fed_back(tmp_path):
    reference = build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    kv = [c for c in pipe.executor.components if isinstance(c, KVCache)]
    assert len(kv) == 1 and kv[0].format == "combined" and len(kv[0].slots) == 2
    ids = [1, 7, 3, 9]
    assert_greedy_agrees(pipe.generate(input_ids=ids, max_new_tokens=20).tokens, *reference(ids, 20), FP32_KERNELS)


def test_combined_cache_continues_by_replaying_when_it_cannot_rewind(tmp_path):
    reference = build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    ids = [1, 7, 3, 9]
    first = pipe.generate(input_ids=ids, max_new_tokens=6).tokens
    assert_greedy_agrees(first, *reference(ids, 6), FP32_KERNELS)
    branch = ids + first[:3] + [2]
    new_ids = pipe.conversation.continue_from(branch)
    assert new_ids == branch          # combined caches don't rewind: the whole prompt runs again
    assert_greedy_agrees(pipe.generate(input_ids=branch, max_new_tokens=10).tokens, *reference(branch, 10), FP32_KERNELS)
