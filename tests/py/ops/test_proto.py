"""The pure-Python ONNX writer: onnx parses and checks what it writes; onnxruntime runs it."""

import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxpipe.ops import proto
from onnxpipe.ops.proto import Graph, Tensor

OPS_DIR = pathlib.Path(proto.__file__).parent


def _load(model_bytes):
    model = onnx.load_from_string(model_bytes)
    onnx.checker.check_model(model, full_check=True)
    return model


def _session(model_bytes):
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


def test_varint_encoding():
    assert proto._varint(0) == b"\x00"
    assert proto._varint(1) == b"\x01"
    assert proto._varint(300) == b"\xac\x02"
    assert proto._varint(-1) == b"\xff" * 9 + b"\x01"  # int64 -1: ten bytes


def test_model_header_and_value_infos():
    g = Graph("header")
    g.input("x", "float16", ["batch", 3, "seq"])
    g.node("Identity", ["x"], "y")
    g.node("Shape", ["x"], "z")
    g.node("ReduceMax", ["z"], "m", keepdims=0)
    g.output("y", "float16", ["batch", 3, "seq"])
    g.output("z", "int64", [3])
    g.output("m", "int64", [])  # a scalar still has a (rank-0) shape
    model = _load(g.to_bytes(opset=18, ir_version=9))
    assert model.ir_version == 9
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 18)]
    assert model.producer_name == "onnxpipe"
    assert model.graph.name == "header"
    x = model.graph.input[0].type.tensor_type
    assert x.elem_type == onnx.TensorProto.FLOAT16
    dims = [d.dim_param or d.dim_value for d in x.shape.dim]
    assert dims == ["batch", 3, "seq"]
    scalar = model.graph.output[2].type.tensor_type
    assert scalar.HasField("shape") and len(scalar.shape.dim) == 0
    assert [n.op_type for n in model.graph.node] == ["Identity", "Shape", "ReduceMax"]


@pytest.mark.parametrize(
    "dtype,values,np_dtype",
    [
        ("float32", [1.5, -2.25, 3.0e-8, 0.0], np.float32),
        ("float16", [1.5, -2.25, 65504.0, 0.0], np.float16),
        ("int64", [1, -1, 2**62, -(2**63)], np.int64),
        ("int32", [1, -1, 2**31 - 1, 7], np.int32),
        ("bool", [True, False, True, True], np.bool_),
    ],
)
def test_initializers_round_trip_and_run(dtype, values, np_dtype):
    g = Graph("consts")
    g.const("c", values, dtype, [2, 2])
    g.node("Identity", ["c"], "y")
    g.output("y", dtype, [2, 2])
    model_bytes = g.to_bytes()
    tensor = _load(model_bytes).graph.initializer[0]
    expected = np.array(values, dtype=np_dtype).reshape(2, 2)
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), expected)
    (y,) = _session(model_bytes).run(None, {})
    assert y.dtype == np_dtype
    np.testing.assert_array_equal(y, expected)


def test_scalar_initializer():
    g = Graph("scalar")
    g.const("c", [-1], "int64", [])
    g.node("Identity", ["c"], "y")
    g.output("y", "int64", [])
    (y,) = _session(g.to_bytes()).run(None, {})
    assert y.shape == () and int(y) == -1


def test_attribute_types():
    g = Graph("attrs")
    g.input("x", "float32", [2])
    g.node("Identity", ["x"], "y")
    g.output("y", "float32", [2])
    model = onnx.load_from_string(g.to_bytes())  # the generic attributes below are not checked
    attrs = proto._attribute("i", -3), proto._attribute("f", 0.5), proto._attribute("s", "abc"), \
        proto._attribute("ints", [1, -2, 3]), proto._attribute("floats", [0.25, 1]), \
        proto._attribute("t", Tensor([1.0, 2.0], "float32", [2])), proto._attribute("empty", [])
    parsed = []
    for raw in attrs:
        a = onnx.AttributeProto()
        a.ParseFromString(raw)
        parsed.append(onnx.helper.get_attribute_value(a))
    assert parsed[:5] == [-3, 0.5, b"abc", [1, -2, 3], [0.25, 1.0]]
    np.testing.assert_array_equal(numpy_helper.to_array(parsed[5]), [1.0, 2.0])
    assert parsed[6] == []
    assert model.graph.node[0].name == "Identity_0"


def test_runs_a_graph_with_attributes_and_constants():
    g = Graph("mix")
    g.input("x", "float32", ["batch", 4])
    g.const("scale", [2.0], "float32", [1])
    g.node("Mul", ["x", "scale"], "scaled")
    g.node("Transpose", ["scaled"], "t", perm=[1, 0])
    g.node("LeakyRelu", ["t"], "leaky", alpha=0.5)
    g.node("ConstantOfShape", [g.node("Shape", ["leaky"], "shape")], "fill",
           value=Tensor([3], "int64", [1]))
    g.node("TopK", ["x", g.const("k", [2], "int64", [1])], ["vals", "idx"], axis=-1)
    for name, dtype, dims in (("leaky", "float32", [4, "batch"]), ("fill", "int64", [4, "batch"]),
                              ("idx", "int64", ["batch", 2])):
        g.output(name, dtype, dims)
    model_bytes = g.to_bytes()
    _load(model_bytes)
    x = np.array([[1.0, -2.0, 3.0, 0.5], [-1.0, 4.0, 0.0, 2.0]], np.float32)
    leaky, fill, idx = _session(model_bytes).run(None, {"x": x})
    t = (2 * x).T
    np.testing.assert_array_equal(leaky, np.where(t > 0, t, 0.5 * t))
    np.testing.assert_array_equal(fill, np.full((4, 2), 3))
    np.testing.assert_array_equal(idx, [[2, 0], [1, 3]])


def test_if_subgraph_uses_outer_values():
    then_g = Graph("then")
    then_g.node("Add", ["x", "x"], "doubled")
    then_g.output("doubled", "float32", ["n"])
    else_g = Graph("else")
    else_g.node("Neg", ["x"], "negated")
    else_g.output("negated", "float32", ["n"])
    g = Graph("branchy")
    g.input("x", "float32", ["n"])
    g.input("flag", "bool", [1])
    g.node("If", ["flag"], "y", then_branch=then_g, else_branch=else_g)
    g.output("y", "float32", ["n"])
    model_bytes = g.to_bytes()
    _load(model_bytes)
    sess = _session(model_bytes)
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "flag": np.array([True])})[0], [2.0, -4.0])
    np.testing.assert_array_equal(sess.run(None, {"x": x, "flag": np.array([False])})[0], [-1.0, 2.0])


def test_errors_name_the_problem():
    g = Graph("bad")
    g.input("x", "float32", [1])
    with pytest.raises(ValueError, match="'x' is defined twice"):
        g.node("Identity", ["x"], "x")
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        g.input("y", "float8", [1])
    with pytest.raises(ValueError, match=r"dims \[2, 2\] need 4 values, got 3"):
        g.const("c", [1, 2, 3], "int64", [2, 2])
    with pytest.raises(ValueError, match="each dim must be"):
        g.input("z", "float32", [-1])
    with pytest.raises(TypeError, match="attribute 'bad'"):
        g.node("Identity", ["x"], "w", bad={"a": 1})
