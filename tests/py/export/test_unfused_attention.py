"""export/unfused_attention.py: GroupQueryAttention spelled out in standard ops gives what
onnxruntime's own GroupQueryAttention kernel gives (the reference, run natively at test time),
for a first prompt, several-token runs over a past, one-token decode steps and beams; nodes it
does not cover are refused by name; the shipped SmolLM2 web graph decodes like model.wasm.onnx."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

from onnxpipe.export import unfused_attention
from onnxpipe.export.unfused_attention import UnfuseError, unfuse
from tests.agreement import FP32_KERNELS

BUNDLE = os.path.join("public", "models", "smollm2-135m-instruct")
MAXLEN = 64
HEAD_SIZE = 64   # SmolLM2-135M (its pipeline.json says so too)


def gqa_model(heads=6, kv_heads=2, size=16, rotary=True, packed=True, **attrs):
    """One GroupQueryAttention node fed the way the genai builder wires it (seqlens_k and the
    total length from an attention mask)."""
    width = (heads + 2 * kv_heads) * size if packed else heads * size
    inputs = [helper.make_tensor_value_info("query", T.FLOAT, ["B", "S", width])]
    if not packed:
        inputs += [helper.make_tensor_value_info(n, T.FLOAT, ["B", "S", kv_heads * size]) for n in ("key", "value")]
    inputs += [helper.make_tensor_value_info(n, T.FLOAT, ["B", kv_heads, "P", size]) for n in ("past_k", "past_v")]
    inputs.append(helper.make_tensor_value_info("attention_mask", T.INT64, ["B", "total"]))
    rng = np.random.default_rng(3)
    angles = np.outer(np.arange(MAXLEN), 1.0 / 10000 ** (np.arange(0, size, 2) / size)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(np.cos(angles), "cos"), onnx.numpy_helper.from_array(np.sin(angles), "sin"),
             onnx.numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             onnx.numpy_helper.from_array(np.array(1, np.int64), "one"),
             onnx.numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32) * 0.3, "w")]
    nodes = [
        helper.make_node("ReduceSum", ["attention_mask", "axis1"], ["sum"]),
        helper.make_node("Sub", ["sum", "one"], ["sub"]),
        helper.make_node("Cast", ["sub"], ["seqlens"], to=T.INT32),
        helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
        helper.make_node("Gather", ["mask_shape", "one"], ["total64"]),
        helper.make_node("Cast", ["total64"], ["total32"], to=T.INT32),
        helper.make_node("MatMul", ["query", "w"], ["projected"]),   # something before the op
        helper.make_node("GroupQueryAttention",
                         ["projected", "" if packed else "key", "" if packed else "value", "past_k", "past_v",
                          "seqlens", "total32", "cos" if rotary else "", "sin" if rotary else ""],
                         ["out", "present_k", "present_v"], name="/layers.0/attn/GroupQueryAttention",
                         domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads,
                         do_rotary=int(rotary), **attrs),
    ]
    outputs = [helper.make_tensor_value_info(n, T.FLOAT, None) for n in ("out", "present_k", "present_v")]
    graph = helper.make_graph(nodes, "gqa", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model


def session(model):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def feeds(batch, new, past, heads=6, kv_heads=2, size=16, packed=True, seed=0):
    rng = np.random.default_rng(seed)
    width = (heads + 2 * kv_heads) * size if packed else heads * size
    out = {"query": rng.standard_normal((batch, new, width)).astype(np.float32),
           "past_k": rng.standard_normal((batch, kv_heads, past, size)).astype(np.float32),
           "past_v": rng.standard_normal((batch, kv_heads, past, size)).astype(np.float32),
           "attention_mask": np.ones((batch, past + new), np.int64)}
    if not packed:
        out["key"] = rng.standard_normal((batch, new, kv_heads * size)).astype(np.float32)
        out["value"] = rng.standard_normal((batch, new, kv_heads * size)).astype(np.float32)
    return out


@pytest.mark.parametrize("batch,new,past", [(1, 5, 0), (1, 7, 20), (1, 1, 33), (3, 1, 12), (2, 4, 0)])
@pytest.mark.parametrize("rotary", [True, False])
def test_matches_groupqueryattention(batch, new, past, rotary):
    model = gqa_model(rotary=rotary)
    reference = session(model)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    assert unfuse(rewritten) == 1
    assert not [n for n in rewritten.graph.node if n.op_type == "GroupQueryAttention"]

    got = session(rewritten)
    x = feeds(batch, new, past, seed=batch * 100 + new + past)
    for name, want, have in zip(("out", "present_k", "present_v"), reference.run(None, x), got.run(None, x)):
        assert want.shape == have.shape, name
        np.testing.assert_allclose(have, want, atol=2e-5, rtol=1e-4, err_msg=name)


def test_separate_key_value_and_scale():
    model = gqa_model(packed=False, scale=0.3, heads=4, kv_heads=4)
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    unfuse(rewritten)
    x = feeds(1, 3, 6, heads=4, kv_heads=4, packed=False)
    for want, have in zip(session(model).run(None, x), session(rewritten).run(None, x)):
        np.testing.assert_allclose(have, want, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("attrs,named", [({"local_window_size": 16}, "local_window_size 16"),
                                         ({"softcap": 30.0}, "softcap 30.0"),
                                         ({"rotary_interleaved": 1}, "rotary_interleaved 1")])
def test_refuses_what_it_does_not_spell_out(attrs, named):
    model = gqa_model(**attrs)
    with pytest.raises(UnfuseError, match=f"'/layers.0/attn/GroupQueryAttention'.*{named}"):
        unfuse(model)
    assert [n.op_type for n in model.graph.node].count("GroupQueryAttention") == 1   # left whole


def test_cli_needs_the_same_folder(tmp_path):
    source = tmp_path / "a" / "m.onnx"
    source.parent.mkdir()
    onnx.save(gqa_model(), str(source))
    assert unfused_attention.main([str(source), str(tmp_path / "elsewhere.onnx")]) == 2
    assert unfused_attention.main([str(source), str(source.parent / "m.web.onnx")]) == 0


def logits_over(path: str, chunks: list[list[int]]) -> list[np.ndarray]:
    """The last-token logits of each run of ``chunks`` fed one after the other (KV fed back)."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    past = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    x = {i.name: np.zeros((1, i.shape[1], 0, HEAD_SIZE), np.float32) for i in past}   # dim 3 is symbolic
    names = [o.name for o in sess.get_outputs()]
    total, seen = 0, []
    for chunk in chunks:
        total += len(chunk)
        x["input_ids"] = np.array([chunk], np.int64)
        x["attention_mask"] = np.ones((1, total), np.int64)
        out = dict(zip(names, sess.run(None, x)))
        seen.append(out["logits"][0, -1])
        for i in past:
            x[i.name] = out[i.name.replace("past_key_values.", "present.")]
    return seen


def test_shipped_web_graph_gives_the_wasm_files_logits():
    """The SmolLM2 bundle's web graph (the wasm provider's file) points at model.wasm.onnx.data
    and, natively, gives model.wasm.onnx's logits (within the fp32 kernel tolerance) for a
    prompt, a several-token run over it and one-token steps."""
    from onnxpipe.export import smollm2

    web = os.path.join(BUNDLE, smollm2.WEB_FILE)
    if not os.path.isfile(web):
        pytest.skip(f"{web} not built (make models)")
    graph = onnx.load(web, load_external_data=False)
    assert not [n for n in graph.graph.node if n.op_type == "GroupQueryAttention"]
    locations = {e.value for i in graph.graph.initializer for e in i.external_data if e.key == "location"}
    assert locations == {smollm2.WASM_FILE + ".data"}
    rng = np.random.default_rng(7)
    chunks = [rng.integers(3, 49000, 40).tolist(), rng.integers(3, 49000, 13).tolist()] + [[int(t)] for t in
                                                                                          rng.integers(3, 49000, 6)]
    fused = logits_over(os.path.join(BUNDLE, smollm2.WASM_FILE), chunks)
    for step, (want, have) in enumerate(zip(fused, logits_over(web, chunks))):
        assert float(np.abs(want - have).max()) < FP32_KERNELS, step


def test_a_shared_buffer_cache_runs_separate_on_the_web_file():
    """pipeline.json declares SmolLM2's cache shared_buffer (onnxruntime-genai's file updates one
    buffer in place); natively the wasm variant's file concatenates its past, so its cache runs
    separate, and its greedy tokens agree with model.wasm.onnx's (shared buffer) by the margin rule."""
    import onnxpipe
    from onnxpipe.export import smollm2
    from onnxpipe.loops.batched import _loaded
    from onnxpipe.state.kv_cache import KVCache
    from tests.agreement import assert_greedy_agrees, greedy_with_margins

    if not os.path.isfile(os.path.join(BUNDLE, smollm2.WEB_FILE)):
        pytest.skip("SmolLM2 bundle not built (make models)")
    formats = {}
    for variant in ("cpu", "wasm"):
        pipe = onnxpipe.load(BUNDLE, variant=variant)
        formats[variant] = next(c for c in _loaded(pipe).executor.components if isinstance(c, KVCache)).format
    assert formats == {"cpu": "shared_buffer", "wasm": "separate"}
    ids, want, want_margins = greedy_with_margins(BUNDLE, 16, chat="Name a large ocean.", variant="cpu")
    _, got, _ = greedy_with_margins(BUNDLE, 16, prompt_ids=ids, variant="wasm")
    assert_greedy_agrees(got.tokens, want.tokens, want_margins, FP32_KERNELS)
