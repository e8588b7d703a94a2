"""ModelProto -> GraphInfo: the graph's structure without its weights.

Reads graph inputs, outputs and value_info (dtype and dims, each an int or a symbolic name),
initializers (name, dtype, dims; their data is skipped by length, never read), and nodes
(op_type, domain, inputs, outputs, attributes). Small constant tensors held by nodes (a
Reshape's target shape) are decoded; subgraph attributes (If/Loop bodies) become GraphInfos
(a merged decoder is one If around two whole decoders).
Field numbers follow onnx/onnx.proto, as in ops/proto.py, the writer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..ops.proto import DTYPES
from .wire import I32, I64, LEN, Span, WireError, fields, floats, ints, signed64

# TensorProto.DataType code -> name: ops/proto.py's, plus the ones the runtime only reads
DTYPE_NAMES: dict[int, str] = {code: name for name, (code, _) in DTYPES.items()}
DTYPE_NAMES.update({4: "uint16", 5: "int16", 8: "string", 12: "uint32", 13: "uint64",
                    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn",
                    18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4",
                    22: "int4", 23: "float4e2m1"})
_STRUCT = {name: fmt for name, (_, fmt) in DTYPES.items()}
NODE_CONSTANT_BYTES = 4096   # node-held tensors up to this size are decoded (shape constants)

Dim = int | str | None       # a fixed size, a symbolic name, or unknown


@dataclass(frozen=True)
class ValueInfo:
    name: str
    dtype: str | None                   # None when the type is not a tensor (or not given)
    dims: tuple[Dim, ...] | None        # None when the shape is not given at all


@dataclass(frozen=True)
class TensorMeta:
    """A tensor's metadata: an initializer, or a node's constant (then ``values`` when small)."""

    name: str
    dtype: str | None
    dims: tuple[int, ...]
    external: bool = False              # data in another file (data_location EXTERNAL)
    values: tuple | None = None         # decoded only for small node constants


@dataclass(frozen=True)
class Node:
    op_type: str
    domain: str
    name: str
    inputs: tuple[str, ...]             # "" marks an omitted optional input
    outputs: tuple[str, ...]
    attrs: dict = field(default_factory=dict, hash=False)


@dataclass
class GraphInfo:
    name: str = ""
    inputs: dict[str, ValueInfo] = field(default_factory=dict)
    outputs: dict[str, ValueInfo] = field(default_factory=dict)
    value_info: dict[str, ValueInfo] = field(default_factory=dict)
    initializers: dict[str, TensorMeta] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)

    def producer(self, name: str) -> Node | None:
        """The node that outputs ``name`` (None for graph inputs and initializers)."""
        if not hasattr(self, "_producers"):
            self._producers = {o: n for n in self.nodes for o in n.outputs if o}
        return self._producers.get(name)

    def consumers(self, name: str) -> list[Node]:
        if not hasattr(self, "_consumers"):
            self._consumers: dict[str, list[Node]] = {}
            for n in self.nodes:
                for i in dict.fromkeys(n.inputs):
                    if i:
                        self._consumers.setdefault(i, []).append(n)
        return self._consumers.get(name, [])

    def subgraphs(self) -> list["GraphInfo"]:
        """Graphs held by node attributes (If branches, Loop bodies), outermost first."""
        return [v for n in self.nodes for v in n.attrs.values() if isinstance(v, GraphInfo)]

    def flattened(self) -> "GraphInfo":
        """One graph with every subgraph's nodes, value_info and initializers beside this one's
        (names are unique across an ONNX model's scopes); inputs and outputs stay this graph's."""
        flat = GraphInfo(self.name, dict(self.inputs), dict(self.outputs), dict(self.value_info),
                         dict(self.initializers), list(self.nodes))
        todo = self.subgraphs()
        while todo:
            sub = todo.pop(0)
            flat.nodes.extend(sub.nodes)
            for table in (sub.inputs, sub.outputs, sub.value_info):
                for k, v in table.items():
                    flat.value_info.setdefault(k, v)
            flat.initializers.update(sub.initializers)
            todo.extend(sub.subgraphs())
        return flat

    def declared(self, name: str) -> ValueInfo | None:
        """What the graph itself says about ``name``: its I/O entry, else its value_info."""
        return self.outputs.get(name) or self.inputs.get(name) or self.value_info.get(name)


@dataclass
class ModelInfo:
    ir_version: int = 0
    producer: str = ""
    opsets: dict[str, int] = field(default_factory=dict)   # domain ("" = ai.onnx) -> version
    graph: GraphInfo = field(default_factory=GraphInfo)


# ---- messages ---------------------------------------------------------------------------------

def parse_model(span: Span) -> ModelInfo:
    """ModelProto: ir_version (1), producer_name (2), graph (7), opset_import (8)."""
    model = ModelInfo()
    seen_graph = False
    for num, wire, value in fields(span):
        if num == 1 and not isinstance(value, Span):
            model.ir_version = value
        elif num == 2 and wire == LEN:
            model.producer = value.text()
        elif num == 7 and wire == LEN:
            model.graph, seen_graph = parse_graph(value), True
        elif num == 8 and wire == LEN:
            domain, version = "", 0
            for n, _, v in fields(value.message()):
                if n == 1:
                    domain = v.text()
                elif n == 2:
                    version = v
            model.opsets[domain] = version
    if not seen_graph:
        raise WireError("no graph in this file (ModelProto field 7): not an ONNX model")
    return model


def parse_graph(span: Span) -> GraphInfo:
    """GraphProto: node (1), name (2), initializer (5), input (11), output (12), value_info (13)."""
    graph = GraphInfo()
    for num, wire, value in fields(span):
        if wire != LEN:
            continue
        if num == 1:
            graph.nodes.append(_node(value.message()))
        elif num == 2:
            graph.name = value.text()
        elif num == 5:
            t = _tensor(value, decode=False)   # streamed: its data is skipped, never fetched
            graph.initializers[t.name] = t
        elif num in (11, 12, 13):
            info = _value_info(value.message())
            {11: graph.inputs, 12: graph.outputs, 13: graph.value_info}[num][info.name] = info
    # an initializer listed as an input (older IR) is a constant, not something to feed
    for name in list(graph.inputs):
        if name in graph.initializers:
            del graph.inputs[name]
    return graph


def _value_info(span: Span) -> ValueInfo:
    """ValueInfoProto: name (1), type (2) -> TypeProto.tensor_type (1) -> elem_type (1), shape (2)."""
    name, dtype, dims = "", None, None
    for num, wire, value in fields(span):
        if num == 1 and wire == LEN:
            name = value.text()
        elif num == 2 and wire == LEN:
            for tnum, twire, tvalue in fields(value):
                if tnum == 1 and twire == LEN:
                    dtype, dims = _tensor_type(tvalue)
    return ValueInfo(name, dtype, dims)


def _tensor_type(span: Span) -> tuple[str | None, tuple[Dim, ...] | None]:
    dtype, dims = None, None
    for num, wire, value in fields(span):
        if num == 1 and not isinstance(value, Span):
            dtype = DTYPE_NAMES.get(value, f"type{value}")
        elif num == 2 and wire == LEN:
            dims = tuple(_dimension(d) for n, w, d in fields(value) if n == 1 and w == LEN)
    return dtype, dims


def _dimension(span: Span) -> Dim:
    """TensorShapeProto.Dimension: dim_value (1) or dim_param (2)."""
    for num, wire, value in fields(span):
        if num == 1 and not isinstance(value, Span):
            return signed64(value)
        if num == 2 and wire == LEN:
            return value.text() or None
    return None


def _tensor(span: Span, decode: bool) -> TensorMeta:
    """TensorProto: dims (1), data_type (2), name (8), raw_data (9), data_location (14); the
    typed data fields (float_data 4, int32_data 5, int64_data 7, double_data 10). Data is read
    only when ``decode`` and small."""
    dims: list[int] = []
    code, name, external = 0, "", False
    raw: Span | None = None
    typed: list = []
    for num, wire, value in fields(span):
        if num == 1:
            dims.extend(ints(wire, value))
        elif num == 2 and not isinstance(value, Span):
            code = value
        elif num == 8 and wire == LEN:
            name = value.text()
        elif num == 9 and wire == LEN:
            raw = value
        elif num == 14 and not isinstance(value, Span):
            external = value == 1
        elif decode and num in (4, 5, 7, 10):
            typed.append((num, wire, value))
    dtype = DTYPE_NAMES.get(code)
    values = None
    if decode and not external:
        values = _decode(dtype, raw, typed)
    return TensorMeta(name, dtype, tuple(dims), external, values)


def _decode(dtype: str | None, raw: Span | None, typed: list) -> tuple | None:
    if raw is not None:
        fmt = _STRUCT.get(dtype or "")
        if fmt is None or raw.length > NODE_CONSTANT_BYTES:
            return None
        data = raw.bytes()
        return struct.unpack(f"<{len(data) // struct.calcsize(fmt)}{fmt}", data)
    out: list = []
    for num, wire, value in typed:
        if isinstance(value, Span) and value.length > NODE_CONSTANT_BYTES:
            return None
        if num == 4:
            out.extend(floats(wire, value))
        elif num == 10:
            out.extend(floats(wire, value, "d"))
        else:
            out.extend(ints(wire, value))
    return tuple(out)


def _node(span: Span) -> Node:
    """NodeProto: input (1), output (2), name (3), op_type (4), attribute (5), domain (7)."""
    inputs, outputs, attrs = [], [], {}
    name = op_type = domain = ""
    for num, wire, value in fields(span):
        if wire != LEN:
            continue
        if num == 1:
            inputs.append(value.text())
        elif num == 2:
            outputs.append(value.text())
        elif num == 3:
            name = value.text()
        elif num == 4:
            op_type = value.text()
        elif num == 5:
            key, val = _attribute(value)
            attrs[key] = val
        elif num == 7:
            domain = value.text()
    return Node(op_type, domain, name, tuple(inputs), tuple(outputs), attrs)


def _attribute(span: Span) -> tuple[str, object]:
    """AttributeProto: name (1), f (2), i (3), s (4), t (5), g (6), floats (7), ints (8),
    strings (9). The value is the field that is set (the ``type`` field, 20, only confirms it);
    a subgraph (g, 6) becomes a GraphInfo."""
    name, value = "", None
    many_f: list[float] = []
    many_i: list[int] = []
    many_s: list[str] = []
    for num, wire, v in fields(span):
        if num == 1 and wire == LEN:
            name = v.text()
        elif num == 2 and wire == I32:
            value = struct.unpack("<f", v)[0]
        elif num == 3 and not isinstance(v, Span) and wire not in (I32, I64):
            value = signed64(v)
        elif num == 4 and wire == LEN:
            raw = v.bytes()
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                value = raw
        elif num == 5 and wire == LEN:
            value = _tensor(v, decode=True)
        elif num == 6 and wire == LEN:
            value = parse_graph(v)
        elif num == 7:
            many_f.extend(floats(wire, v))
        elif num == 8:
            many_i.extend(ints(wire, v))
        elif num == 9 and wire == LEN:
            many_s.append(v.text())
    if value is None:
        value = tuple(many_f) if many_f else tuple(many_i) if many_i else tuple(many_s) if many_s else value
    return name, value
