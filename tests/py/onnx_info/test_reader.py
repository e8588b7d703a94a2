"""The pure-Python ONNX reader against the onnx package: every fixture model, the runtime's own
graphs, and a model whose weights (> 1 MB each) sit inline in the file, which the reader must
seek past rather than read."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxpipe.onnx_info import (BlockSource, BytesSource, FileSource, GraphInfo, TensorMeta, read_model,
                                read_model_file)
from onnxpipe.onnx_info.model import DTYPE_NAMES
from onnxpipe.onnx_info.wire import Span, fields, ints
from onnxpipe.ops import kv, proto, sampler
from tests.fixtures import tiny_models


def _dims(type_proto):
    if not type_proto.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                 for d in type_proto.tensor_type.shape.dim)


def _value_infos(entries, skip=()):
    return {v.name: (DTYPE_NAMES.get(v.type.tensor_type.elem_type) if v.type.HasField("tensor_type") else None,
                     _dims(v.type) if v.type.HasField("tensor_type") else None)
            for v in entries if v.name not in skip}


def _attr(a):
    """onnx's view of one attribute, in the reader's terms."""
    if a.type == onnx.AttributeProto.TENSOR:
        arr = numpy_helper.to_array(a.t) if a.t.data_location != onnx.TensorProto.EXTERNAL else None
        return ("tensor", tuple(a.t.dims), DTYPE_NAMES.get(a.t.data_type),
                None if arr is None or arr.nbytes > 4096 else tuple(arr.reshape(-1).tolist()))
    if a.type == onnx.AttributeProto.GRAPH:
        return "graph"   # compared on its own, recursively
    if a.type == onnx.AttributeProto.GRAPHS:
        return None
    value = helper.get_attribute_value(a)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, list):
        value = tuple(v.decode("utf-8") if isinstance(v, bytes) else v for v in value)
        if a.type == onnx.AttributeProto.FLOATS:
            value = tuple(np.float32(v).item() for v in value)
    if isinstance(value, float):
        value = np.float32(value).item()
    return value if value != () else None


def _ours(value):
    if isinstance(value, GraphInfo):
        return "graph"
    if isinstance(value, TensorMeta):
        vals = None if value.values is None else tuple(np.asarray(value.values).reshape(-1).tolist())
        return ("tensor", value.dims, value.dtype, vals)
    return value


def assert_same(ours, model: onnx.ModelProto) -> None:
    assert ours.ir_version == model.ir_version
    assert ours.opsets == {o.domain: o.version for o in model.opset_import}
    assert_same_graph(ours.graph, model.graph)


def assert_same_graph(got: GraphInfo, g: onnx.GraphProto) -> None:
    init_names = {t.name for t in g.initializer}
    assert got.name == g.name
    assert {n: (v.dtype, v.dims) for n, v in got.inputs.items()} == _value_infos(g.input, skip=init_names)
    assert {n: (v.dtype, v.dims) for n, v in got.outputs.items()} == _value_infos(g.output)
    assert {n: (v.dtype, v.dims) for n, v in got.value_info.items()} == _value_infos(g.value_info)
    assert {n: (t.dtype, t.dims, t.external) for n, t in got.initializers.items()} == {
        t.name: (DTYPE_NAMES.get(t.data_type), tuple(t.dims), t.data_location == onnx.TensorProto.EXTERNAL)
        for t in g.initializer}
    assert all(t.values is None for t in got.initializers.values()), "initializer data must not be read"
    assert len(got.nodes) == len(g.node)
    for mine, theirs in zip(got.nodes, g.node):
        assert (mine.op_type, mine.domain, mine.name) == (theirs.op_type, theirs.domain, theirs.name)
        assert (mine.inputs, mine.outputs) == (tuple(theirs.input), tuple(theirs.output))
        assert {k: _ours(v) for k, v in mine.attrs.items()} == {a.name: _attr(a) for a in theirs.attribute}
        for a in theirs.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                assert_same_graph(mine.attrs[a.name], a.g)


def _fixture_models():
    for name in tiny_models.ALL:
        for path in sorted(tiny_models.ensure(name).rglob("*.onnx")):
            yield pytest.param(path, id=f"{name}/{path.relative_to(tiny_models.bundle_path(name))}")


@pytest.fixture(scope="module")
def fixture_models():
    return list(_fixture_models())


def test_every_fixture_model_reads_as_onnx_does(fixture_models):
    assert len(fixture_models) >= 10
    for param in fixture_models:
        path = param.values[0]
        assert_same(read_model_file(str(path)), onnx.load(str(path), load_external_data=False))


def test_runtime_graphs_from_the_writer_read_back():
    """ops/proto.py's writer and this reader agree (subgraph attributes are not descended)."""
    graphs = (sampler.greedy_graph("float32", with_penalty=True), sampler.sampling_graph("float16"),
              kv.slice_seq_many_graph("float16", 3), kv.grow_seq_graph())
    for model_bytes in graphs:
        assert_same(read_model(BytesSource(model_bytes)), onnx.load_from_string(model_bytes))


def test_inline_weights_are_skipped_not_read(tmp_path):
    """Four 2 MB float32 weights inline in the file: reading the graph fetches a few blocks around
    each tensor header, never the payloads."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((512, 1024)).astype(np.float32), f"w{i}")
               for i in range(4)]
    nodes, x = [], "x"
    for i in range(4):
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("Reshape", [f"h{i}", f"shape{i}"], [f"r{i}"], name=f"reshape{i}"))
        shape = numpy_helper.from_array(np.array([0, -1, 512 if i < 3 else 1024], np.int64))
        nodes.insert(-1, helper.make_node("Constant", [], [f"shape{i}"], value=shape))
        x = f"r{i}"
    graph = helper.make_graph(nodes, "inline", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "s", 512])],
                              [helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, ["b", "s", 1024])],
                              initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "inline.onnx"
    onnx.save(model, str(path))
    size = path.stat().st_size
    assert size > 8_000_000

    source = FileSource(str(path))
    try:
        ours = read_model(source, str(path))
    finally:
        source.close()
    assert_same(ours, onnx.load(str(path)))
    assert source.bytes_fetched < size // 10, f"read {source.bytes_fetched} of {size} bytes"
    assert ours.graph.initializers["w3"].dims == (512, 1024)


def test_packed_and_unpacked_repeated_ints_read_alike():
    """proto2 writes repeated ints one per field, proto3-style writers pack them: both are valid."""
    unpacked = b"".join(proto._int(1, d) for d in (3, 300, -1))
    packed = proto._bytes(1, b"".join(proto._varint(d) for d in (3, 300, -1)))
    for data in (unpacked, packed):
        got = [v for _, wire, value in fields(Span(BytesSource(data), 0, len(data))) for v in ints(wire, value)]
        assert got == [3, 300, -1]


def test_block_source_reads_across_block_edges():
    data = bytes(range(256)) * 1024   # 256 KiB: four blocks
    source = BlockSource(lambda off, n: data[off:off + n], len(data))
    for offset, n in ((0, 10), (65530, 20), (65536 * 2 - 1, 65536 + 2), (len(data) - 5, 50), (1000, 200_000)):
        assert source.read(offset, n) == data[offset:offset + n]
