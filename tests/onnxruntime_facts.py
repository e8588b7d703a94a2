"""Facts about the onnxruntime build and CPU the tests run on, probed rather than assumed."""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def u8s8_sums_are_exact() -> bool:
    """Does onnxruntime's CPU MatMulInteger sum uint8 x int8 products exactly here?

    On x86 CPUs with AVX2 but no VNNI its kernel adds pairs of products in saturating 16-bit
    lanes (vpmaddubsw): 255 * 127 summed 64 times comes out as 1,048,544, not 2,072,640. Files
    with uint8 activations and int8 weights (transformers.js q8, Kokoro's MatMulInteger recipe)
    then compute something else than their integers say; uint8 x uint8 (ConvInteger) does not.
    """
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 64]),
                               helper.make_tensor_value_info("b", TensorProto.INT8, [64, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"a": np.full((1, 64), 255, np.uint8), "b": np.full((64, 1), 127, np.int8)})[0]
    return int(got[0, 0]) == 255 * 127 * 64
