"""The heap plan natively: the edited graph (weights outside it, MatMulNBits expanded) against
onnxruntime on the original file, logits and greedy tokens, on real weights (SmolLM2-135M's
transformers.js folder, `make models`) and on a small version of Qwen2.5-0.5B's real shape."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxpipe.heap.graph_edit import MOUNT_DIR
from onnxpipe.heap.native import write_plan
from onnxpipe.heap.plan import plan_file
from onnxpipe.onnx_info import FileSource
from tests.agreement import FP32_KERNELS, assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.tjs_folders import ort_greedy

ROOT = Path(__file__).resolve().parents[3]
SMOLLM2_TJS = ROOT / "public" / "models" / "smollm2-135m-instruct-tjs"
# The expanded weight is the kernel's own (q - zp) * scale; what differs is the GEMM's order of
# summation against onnxruntime's MatMulNBits kernel (natively: AVX2, blocks summed separately).
EXPANDED_FP32 = FP32_KERNELS
# q4f16 graphs round every activation to fp16 around the MatMul: a few fp16 ulps of a logit of 30.
EXPANDED_FP16 = 0.1


def plan(path: Path, expand: str = "all", **kw):
    source = FileSource(str(path))
    try:
        return plan_file(source, path.name, expand, **kw)
    finally:
        source.close()


def logits(model: Path, ids: list[int]) -> np.ndarray:
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_key_values."):
            feeds[i.name] = np.zeros((1, i.shape[1], 0, i.shape[3]), np.float16 if "16" in i.type else np.float32)
    feeds.update(input_ids=np.array([ids], np.int64), attention_mask=np.ones((1, len(ids)), np.int64),
                 position_ids=np.arange(len(ids), dtype=np.int64)[None])
    return sess.run(["logits"], feeds)[0][0].astype(np.float64)


def written(tmp_path: Path, model: Path, p) -> Path:
    return Path(write_plan(p, str(model.parent), str(tmp_path / "out"), model.name))


def smollm2(dtype: str) -> Path:
    path = SMOLLM2_TJS / "onnx" / {"q4": "model_q4.onnx", "q4f16": "model_q4f16.onnx",
                                   "fp16": "model_fp16.onnx", "fp32": "model.onnx"}[dtype]
    if not path.is_file():
        pytest.skip(f"{path} missing: make models")
    return path


@pytest.mark.parametrize("dtype,tolerance", [("q4", EXPANDED_FP32), ("q4f16", EXPANDED_FP16)])
def test_expanded_real_weights_equal_the_original(tmp_path, dtype, tolerance):
    src = smollm2(dtype)
    p = plan(src)
    assert len(p.expanded) == 211 and not p.kept and p.temp_bytes == 0
    ids = [1, 504, 3575, 282, 4649, 314, 7042, 28]
    want, got = logits(src, ids), logits(written(tmp_path, src, p), ids)
    assert np.abs(got - want).max() < tolerance
    assert (got.argmax(-1) == want.argmax(-1)).all()


def test_weights_outside_the_graph_change_nothing(tmp_path):
    src = smollm2("fp16")
    p = plan(src, "none")
    assert len(p.model) < 4 << 20 < src.stat().st_size   # the graph without its 325 MB of weights
    assert p.mounts and all(s.file == src.name for s in p.mounts.values())
    ids = [1, 504, 3575, 282]
    assert np.array_equal(logits(written(tmp_path, src, p), ids), logits(src, ids))


def test_fp16_matmul_weights_widened_as_the_engine_does(tmp_path):
    """fp16 MatMul weights opened as fp32 (Cast in, fp32 MatMul, Cast out): what onnxruntime's
    CPU kernels do with an fp16 MatMul, so the logits are bit for bit the original's, and no fp16
    copy is left in the heap."""
    src = smollm2("fp16")
    p = plan(src)
    assert p.summary()["widened"] == 211 and p.widened_bytes == 0
    fp16_left = [w for w in p.edited.weights if w.endswith("onnxpipe_fp32_weight")]
    assert len(fp16_left) == 211
    ids = [1, 504, 3575, 282, 4649]
    assert np.array_equal(logits(written(tmp_path, src, p), ids), logits(src, ids))
    # the engine's own widening, had the plan left them: counted, not made
    as_stored = plan(src, "none")
    assert as_stored.widened_bytes > 0 and as_stored.summary()["widened"] == 0
    assert abs(as_stored.heap_bytes - p.heap_bytes) <= 0.01 * p.heap_bytes


def test_chunks_bound_every_buffer(tmp_path):
    """No mount is larger than the chunk size unless one weight alone is (never one buffer for a
    multi-gigabyte file): the same logits."""
    src = smollm2("q4")
    chunk = 8 << 20
    p = plan(src, "none", chunk_bytes=chunk)
    biggest = max(w for w in p.edited.weights.values())
    assert len(p.mounts) > 10
    assert all(s.length <= max(chunk, biggest) for s in p.mounts.values())
    ids = [1, 504, 3575]
    assert np.array_equal(logits(written(tmp_path, src, p), ids), logits(src, ids))


@pytest.fixture(scope="module")
def sized_small() -> Path:
    return tiny_models.ensure("sized_qwen_small")


@pytest.mark.parametrize("dtype", ["q4", "q4f16"])
def test_real_shape_greedy_equals_the_original_by_the_margin_rule(tmp_path, sized_small, dtype):
    expected = json.loads((sized_small / "expected.json").read_text())
    variant = expected["variants"][dtype]
    src = sized_small / variant["file"]
    p = plan(src)
    assert p.expanded and not p.kept
    tokens, _ = ort_greedy(written(tmp_path, src, p), expected["prompt"], expected["steps"])
    assert_greedy_agrees(tokens, variant["greedy_tokens"], variant["margins"],
                         EXPANDED_FP32 if dtype == "q4" else EXPANDED_FP16, f"{dtype} expanded")


def test_budget_expands_what_fits_and_keeps_the_rest(sized_small):
    src = sized_small / "onnx" / "model_q4.onnx"
    everything, nothing = plan(src, "all"), plan(src, "none")
    budget = (nothing.heap_bytes + everything.heap_bytes) // 2
    part = plan(src, "auto", budget=budget)
    assert nothing.heap_bytes < part.heap_bytes <= budget < everything.heap_bytes
    assert part.expanded and part.kept and set(part.kept.values()) == {"the heap budget"}
    # what a kept node allocates per call is its fp32 matrix: the largest kept one counts
    sizes = {s["out"]: s["k"] * s["n"] * 4 for s in everything.materialize}
    kept_sizes = [size for spec, size in zip(everything.materialize, sizes.values())
                  if everything.expanded[everything.materialize.index(spec)] in part.kept]
    assert part.temp_bytes == max(kept_sizes)


def _nbits_model(tmp_path: Path, bits: int, symmetric: bool, k=64, n=48) -> tuple[Path, np.ndarray]:
    """One MatMul quantized by onnxruntime's own MatMulNBits quantizer."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    rng = np.random.default_rng(bits + 2 * symmetric)
    w = rng.standard_normal((k, n)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [None, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    q = MatMulNBitsQuantizer(model, bits=bits, block_size=32, is_symmetric=symmetric)
    q.process()
    path = tmp_path / f"nbits{bits}{'s' if symmetric else 'a'}.onnx"
    onnx.save_model(q.model.model, str(path))
    return path, rng.standard_normal((3, k)).astype(np.float32)


@pytest.mark.parametrize("bits,symmetric", [(4, True), (4, False), (8, True), (8, False)])
def test_bits_and_zero_points(tmp_path, bits, symmetric):
    src, a = _nbits_model(tmp_path, bits, symmetric)
    p = plan(src)
    assert len(p.expanded) == 1, p.kept
    out = written(tmp_path, src, p)
    run = lambda m: ort.InferenceSession(str(m), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]  # noqa: E731
    assert np.abs(run(out) - run(src)).max() < 1e-4


def test_what_it_does_not_expand_is_kept_with_the_reason(tmp_path):
    src, _ = _nbits_model(tmp_path, 4, True)
    m = onnx.load(str(src))
    node = next(n for n in m.graph.node if n.op_type == "MatMulNBits")
    for attr in node.attribute:
        if attr.name == "bits":
            attr.i = 2
    onnx.save_model(m, str(src))
    p = plan(src)
    assert not p.expanded and list(p.kept.values()) == ["2-bit weights"]


def test_unknown_expand_mode_is_refused(tmp_path):
    from onnxpipe.errors import InputError

    src, _ = _nbits_model(tmp_path, 4, True)
    with pytest.raises(InputError, match="expand_weights: expected one of auto, all, none"):
        plan(src, "fp32")


def test_mount_locations_stay_inside_their_folder(tmp_path):
    src, _ = _nbits_model(tmp_path, 4, True, k=256, n=256)
    p = plan(src, "none")
    assert all(loc.startswith(f"{MOUNT_DIR}/") and ".." not in loc for loc in p.mounts)
    assert not any(os.path.isabs(loc) for loc in p.mounts)
