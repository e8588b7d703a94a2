"""Weights stored as fp16 only where that is exact (export/whisper_fp16.py): the graph's
outputs are bit-identical, and a weight fp16 can't hold stays float32."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnxpipe.export.whisper_fp16 import MIN_ELEMENTS, fp16_stored


def test_exact_weights_are_halved_and_outputs_unchanged(tmp_path):
    rng = np.random.default_rng(0)
    exact = rng.standard_normal((64, 32)).astype(np.float16).astype(np.float32)   # fp16 values
    inexact = rng.standard_normal((32, 32)).astype(np.float32)                     # full fp32
    tiny = np.full((4,), 1 / 3, np.float32)                                          # below MIN_ELEMENTS
    assert exact.size >= MIN_ELEMENTS and inexact.size >= MIN_ELEMENTS
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "exact"], ["h"]), helper.make_node("MatMul", ["h", "inexact"], ["h2"]),
         helper.make_node("Add", ["h2", "tiny_bias"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        [numpy_helper.from_array(exact, "exact"), numpy_helper.from_array(inexact, "inexact"),
         numpy_helper.from_array(np.tile(tiny, 8), "tiny_bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src, dst = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(model, src)
    assert fp16_stored(str(src), str(dst)) == (1, 1)
    out = onnx.load(dst)
    kinds = {i.name: i.data_type for i in out.graph.initializer}
    assert kinds == {"exact__fp16": TensorProto.FLOAT16, "inexact": TensorProto.FLOAT, "tiny_bias": TensorProto.FLOAT}
    assert [i.name for i in out.graph.input] == ["x"] and [o.name for o in out.graph.output] == ["y"]
    x = rng.standard_normal((2, 64)).astype(np.float32)
    a = ort.InferenceSession(str(src)).run(None, {"x": x})[0]
    b = ort.InferenceSession(str(dst)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(a, b)
    assert dst.stat().st_size < src.stat().st_size
