"""onnxpipe.export.precision on the torch_llama fixture (transformers.js tensor names).

Each variant is run by hand on onnxruntime CPU (tests.fixtures.precision_variants.ort_greedy)
and compared, teacher-forced on the same ids and greedy under the margin rule (tests/agreement.py),
with an independent fp32 reference:

- fp16: the fp32 file itself. Tolerance FP16_LOGITS.
- q4, q4f16, q8: the fp32 graph whose weights are replaced by the variant's own rounded weights,
  dequantized here in numpy. The fixture's weights are random x8, so 4-bit rounding alone moves
  its logits by ~3 (no tolerance could call that "close to fp32" and keep the margin rule
  meaningful); what the runtime and the file layout must get right is the arithmetic on the
  rounded weights, and the rounding itself is checked separately (round to nearest).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxpipe.export import precision
from tests.agreement import assert_greedy_agrees, margins
from tests.fixtures.precision_variants import FP16_LOGITS, ort_greedy
from tests.onnxruntime_facts import u8s8_sums_are_exact

STEPS = 64
# Logit tolerances (fixture logits span about +-5); fp16 vs fp32 is FP16_LOGITS (0.022 measured).
# MatMulNBits on fp32 activations vs MatMul on the same dequantized weights: measured 6e-6.
Q4_LOGITS = 1e-3
# q4f16: fp16 activations on top of the 4-bit weights: measured 0.017.
Q4F16_LOGITS = 0.05
# q8 also quantizes activations (uint8, per tensor, per call): measured 0.24; 1.10 where
# onnxruntime's uint8 x int8 sums saturate (tests/onnxruntime_facts.py: AVX2 without VNNI).
Q8_LOGITS = 0.5 if u8s8_sums_are_exact() else 1.5


@pytest.fixture(scope="module")
def variants(torch_llama, tmp_path_factory):
    out = tmp_path_factory.mktemp("precision")
    src = torch_llama / "model.onnx"
    files = {"fp32": src}
    for dtype, convert in precision.CONVERTERS.items():
        files[dtype] = convert(src, out / f"model{precision.SUFFIXES[dtype]}.onnx")
    return files


@pytest.fixture(scope="module")
def expected(tiny_bundles):
    return tiny_bundles.expected("torch_llama")


def _rounded_weights(path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """fp32 initializer name -> (dequantized weight, scale, lowest and highest code minus the zero
    point), per element in the fp32 layout, read from a variant's MatMulNBits (4-bit blocks,
    zero point 8) or its *_quantized initializers (MatMulInteger / DynamicQuantizeLinear)."""
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        k, n, block = attrs["K"], attrs["N"], attrs["block_size"]
        assert attrs["bits"] == 4 and len(node.input) == 3, "expected symmetric 4-bit (no zero points)"
        packed = inits[node.input[1]]                                  # [N, blocks, block/2] uint8
        scales = inits[node.input[2]].astype(np.float32).reshape(n, -1)
        q = np.stack([packed & 15, packed >> 4], -1).reshape(n, -1, block).astype(np.float32)
        weight = ((q - 8) * scales[:, :, None]).reshape(n, -1)[:, :k]
        scale = np.repeat(scales, block, axis=1)[:, :k].T
        out[node.input[1].removesuffix("_Q4")] = (weight.T, scale, np.full_like(scale, -8), np.full_like(scale, 7))
    for name, q in inits.items():
        if name.endswith("_quantized"):
            base = name.removesuffix("_quantized")
            scale = np.broadcast_to(inits[base + "_scale"].astype(np.float32), q.shape)
            zero = np.broadcast_to(inits[base + "_zero_point"].astype(np.float32), q.shape)
            info = np.iinfo(q.dtype)
            out[base] = ((q.astype(np.float32) - zero) * scale, scale, info.min - zero, info.max - zero)
    return out


def _reference_with(src, weights, dst):
    """The fp32 file with some initializers replaced: the variant's arithmetic done in fp32."""
    model = onnx.load(str(src))
    for init in model.graph.initializer:
        if init.name in weights:
            init.CopyFrom(numpy_helper.from_array(weights[init.name][0].astype(np.float32), init.name))
    onnx.save(model, str(dst))
    return dst


def test_files_have_the_transformers_js_form(variants):
    def io_types(path):
        graph = onnx.load(str(path), load_external_data=False).graph
        return {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]}

    fp16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    for dtype, float_type in {"fp16": fp16, "q4f16": fp16, "q4": f32, "q8": f32}.items():
        types = io_types(variants[dtype])
        floats = {n: t for n, t in types.items() if n == "logits" or ".key" in n or ".value" in n}
        assert set(floats.values()) == {float_type}, (dtype, floats)
        assert types["input_ids"] == onnx.TensorProto.INT64
    ops = {d: {n.op_type for n in onnx.load(str(variants[d])).graph.node} for d in ("q4", "q4f16", "q8")}
    assert "MatMulNBits" in ops["q4"] and "MatMulNBits" in ops["q4f16"]
    assert "MatMulInteger" in ops["q8"] and "DynamicQuantizeLinear" in ops["q8"]


@pytest.mark.parametrize("dtype", ["q4", "q4f16", "q8"])
def test_weights_are_rounded_to_nearest(variants, dtype):
    original = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(variants["fp32"])).graph.initializer}
    rounded = _rounded_weights(variants[dtype])
    assert len(rounded) >= 15  # 2 layers x 7 projections + lm_head
    for name, (weight, scale, lowest, highest) in rounded.items():
        # the code each weight must get: the nearest one in range, given the file's scale
        exact = original[name].astype(np.float32) / scale
        want = np.clip(np.rint(exact), lowest, highest)
        got = np.rint(weight / scale)
        # q4f16 divides fp16 weights by fp16 scales: a near-half fraction may round either way
        tie = np.abs(np.abs(exact - np.floor(exact)) - 0.5) < (1e-2 if dtype == "q4f16" else 1e-4)
        bad = (got != want) & ~tie
        assert not bad.any(), f"{dtype} {name}: {bad.sum()} weights not rounded to the nearest code"
        assert np.abs(scale).max() <= np.abs(original[name]).max() / 7 * 1.01, f"{dtype} {name}: scale too coarse"


def test_fp16_is_close_to_fp32(variants, expected):
    prompt, want = expected["input_ids"], expected["greedy_tokens"]
    ref_tokens, ref_logits = ort_greedy(variants["fp32"], prompt, STEPS)
    assert ref_tokens == want
    _, forced = ort_greedy(variants["fp16"], prompt, STEPS, forced=want)
    assert np.abs(forced - ref_logits).max() <= FP16_LOGITS
    tokens, _ = ort_greedy(variants["fp16"], prompt, STEPS)
    assert_greedy_agrees(tokens, want, margins(ref_logits), FP16_LOGITS, "fp16 vs fp32")


@pytest.mark.parametrize("dtype,tolerance", [("q4", Q4_LOGITS), ("q4f16", Q4F16_LOGITS), ("q8", Q8_LOGITS)])
def test_quantized_matches_its_rounded_weights_in_fp32(variants, expected, tmp_path, dtype, tolerance):
    reference = _reference_with(variants["fp32"], _rounded_weights(variants[dtype]), tmp_path / "ref.onnx")
    prompt = expected["input_ids"]
    ref_tokens, ref_logits = ort_greedy(reference, prompt, STEPS)
    _, forced = ort_greedy(variants[dtype], prompt, STEPS, forced=ref_tokens)
    assert np.abs(forced - ref_logits).max() <= tolerance
    tokens, _ = ort_greedy(variants[dtype], prompt, STEPS)
    assert_greedy_agrees(tokens, ref_tokens, margins(ref_logits), tolerance, f"{dtype} vs rounded fp32")


def test_external_data_round_trip(variants, tmp_path):
    dst = precision.to_fp16(variants["fp32"], tmp_path / "big" / "model_fp16.onnx", external=True)
    assert (dst.parent / "model_fp16.onnx_data").is_file()
    again = precision.to_q4(dst, tmp_path / "model_q4f16.onnx")  # reads the external data back
    prompt = [1, 5, 9]
    a, _ = ort_greedy(again, prompt, 4)
    b, _ = ort_greedy(precision.to_q4f16(variants["fp32"], tmp_path / "direct.onnx"), prompt, 4)
    assert a == b  # identical by construction: same fp16 model, same quantizer
