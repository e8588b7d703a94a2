"""A minimal ONNX model writer in pure Python (standard library only).

The runtime builds its own small graphs (samplers, KV-cache glue) at run time, in CPython and
in Pyodide alike, where neither numpy nor the ``onnx`` package exist. This module encodes just
enough of ``onnx.proto`` to write them: ModelProto, GraphProto, NodeProto, AttributeProto (int,
float, ints, floats, string, tensor, graph), TensorProto (``raw_data``), ValueInfoProto with tensor
types whose dims are ints or symbolic names, and OperatorSetIdProto.

    g = Graph("add_one")
    g.input("x", "float32", ["batch", 4])
    g.const("one", [1.0], "float32", [1])
    g.node("Add", ["x", "one"], ["y"])
    g.output("y", "float32", ["batch", 4])
    model_bytes = g.to_bytes()

Field numbers follow onnx/onnx.proto (proto2); repeated scalars are written unpacked, which
every protobuf parser accepts.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

__all__ = ["DTYPES", "Graph", "Tensor", "dtype_code", "encode_node", "int_field", "len_field"]

# dtype name -> (TensorProto.DataType code, struct format char for raw_data)
DTYPES: dict[str, tuple[int, str]] = {
    "float32": (1, "f"),
    "uint8": (2, "B"),
    "int8": (3, "b"),
    "int32": (6, "i"),
    "int64": (7, "q"),
    "bool": (9, "?"),
    "float16": (10, "e"),
    "float64": (11, "d"),
    "uint32": (12, "I"),
}

# AttributeProto.AttributeType codes
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_TENSOR, _ATTR_GRAPH = 1, 2, 3, 4, 5
_ATTR_FLOATS, _ATTR_INTS = 6, 7


def dtype_code(dtype: str) -> int:
    """The TensorProto.DataType code for a dtype name such as ``"float32"``."""
    try:
        return DTYPES[dtype][0]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {', '.join(sorted(DTYPES))}"
        ) from None


# --- protobuf wire encoding -------------------------------------------------------------

def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # negative int64 values are ten-byte two's complement
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint((field << 3) | wire_type)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(int(value))


def _bytes(field: int, value: bytes | str) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8")
    return _key(field, 2) + _varint(len(value)) + value


# the encoders under public names, for writers that splice new fields into a model they copy
# (heap/graph_edit.py)
int_field = _int
len_field = _bytes


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", value)


# --- messages ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Tensor:
    """A constant tensor: flat ``values`` (row-major) of ``dtype`` with shape ``dims``."""

    values: Sequence[float | int | bool]
    dtype: str
    dims: Sequence[int]
    name: str = ""

    def __post_init__(self) -> None:
        count = 1
        for d in self.dims:
            if not isinstance(d, int) or d < 0:
                raise ValueError(f"tensor {self.name!r}: dims must be non-negative ints, got {list(self.dims)}")
            count *= d
        if len(self.values) != count:
            raise ValueError(
                f"tensor {self.name!r}: dims {list(self.dims)} need {count} values, got {len(self.values)}"
            )
        dtype_code(self.dtype)

    def encode(self) -> bytes:
        """TensorProto bytes: dims (1), data_type (2), name (8), raw_data (9)."""
        code, fmt = DTYPES[self.dtype]
        out = b"".join(_int(1, d) for d in self.dims)
        out += _int(2, code)
        if self.name:
            out += _bytes(8, self.name)
        raw = struct.pack(f"<{len(self.values)}{fmt}", *self.values)
        return out + _bytes(9, raw)


def _attribute(name: str, value: object) -> bytes:
    """AttributeProto bytes, the type inferred from the Python value."""
    out = _bytes(1, name)
    if isinstance(value, Tensor):
        return out + _bytes(5, value.encode()) + _int(20, _ATTR_TENSOR)
    if isinstance(value, Graph):  # a subgraph, e.g. an If branch
        return out + _bytes(6, value.encode()) + _int(20, _ATTR_GRAPH)
    if isinstance(value, bool) or isinstance(value, int):
        return out + _int(3, int(value)) + _int(20, _ATTR_INT)
    if isinstance(value, float):
        return out + _float(2, value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, (str, bytes)):
        return out + _bytes(4, value) + _int(20, _ATTR_STRING)
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, bool)) for v in value):  # an empty list counts as ints
            return out + b"".join(_int(8, int(v)) for v in value) + _int(20, _ATTR_INTS)
        if all(isinstance(v, (int, float)) for v in value):
            return out + b"".join(_float(7, float(v)) for v in value) + _int(20, _ATTR_FLOATS)
    raise TypeError(
        f"attribute {name!r}: unsupported value {value!r} "
        "(expected int, float, str, bytes, Tensor, or a list of ints or floats)"
    )


def _value_info(name: str, dtype: str, dims: Sequence[int | str]) -> bytes:
    """ValueInfoProto bytes for a tensor; each dim is an int or a symbolic name."""
    shape = b""
    for d in dims:
        if isinstance(d, str) and d:
            shape += _bytes(1, _bytes(2, d))
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            shape += _bytes(1, _int(1, d))
        else:
            raise ValueError(f"value {name!r}: each dim must be an int >= 0 or a name, got {d!r}")
    # shape is always written, even for a scalar: onnx's checker requires it on graph I/O
    type_proto = _bytes(1, _int(1, dtype_code(dtype)) + _key(2, 2) + _varint(len(shape)) + shape)
    return _bytes(1, name) + _bytes(2, type_proto)


def encode_node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str = "",
                domain: str = "", **attrs: object) -> bytes:
    """NodeProto bytes: input (1), output (2), name (3), op_type (4), attribute (5), domain (7)."""
    out = b"".join(_bytes(1, i) for i in inputs)
    out += b"".join(_bytes(2, o) for o in outputs)
    if name:
        out += _bytes(3, name)
    out += _bytes(4, op_type)
    out += b"".join(_bytes(5, _attribute(k, v)) for k, v in attrs.items())
    if domain:
        out += _bytes(7, domain)
    return out


class Graph:
    """Builds one ONNX graph (default domain) and serializes it as a ModelProto."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._inputs: list[bytes] = []
        self._outputs: list[bytes] = []
        self._nodes: list[bytes] = []
        self._initializers: list[bytes] = []
        self._names: set[str] = set()

    def _define(self, name: str) -> str:
        if not name:
            raise ValueError(f"graph {self.name!r}: empty value name")
        if name in self._names:
            raise ValueError(f"graph {self.name!r}: value {name!r} is defined twice")
        self._names.add(name)
        return name

    def input(self, name: str, dtype: str, dims: Sequence[int | str]) -> str:
        """Declare a graph input; returns its name."""
        self._inputs.append(_value_info(self._define(name), dtype, dims))
        return name

    def output(self, name: str, dtype: str, dims: Sequence[int | str]) -> str:
        """Declare a graph output (a value some node produces); returns its name."""
        self._outputs.append(_value_info(name, dtype, dims))
        return name

    def const(self, name: str, values: Sequence[float | int | bool], dtype: str,
              dims: Sequence[int]) -> str:
        """Add an initializer (constant tensor); returns its name."""
        tensor = Tensor(list(values), dtype, list(dims), self._define(name))
        self._initializers.append(tensor.encode())
        return name

    def node(self, op_type: str, inputs: Sequence[str], outputs: str | Sequence[str],
             **attrs: object) -> str | list[str]:
        """Add a node; an empty string in ``inputs`` marks an omitted optional input.

        Attribute types follow the Python values: int, float, str/bytes, Tensor, Graph (a
        subgraph, which may use any value of the enclosing graphs), list of ints, list of floats. Returns the output name (or the list of names when several).
        """
        outs = [outputs] if isinstance(outputs, str) else list(outputs)
        for o in outs:
            self._define(o)
        self._nodes.append(encode_node(op_type, inputs, outs, f"{op_type}_{len(self._nodes)}", **attrs))
        return outs[0] if len(outs) == 1 else outs

    def encode(self) -> bytes:
        """GraphProto bytes (the model's graph, or a subgraph attribute)."""
        graph = b"".join(_bytes(1, n) for n in self._nodes)
        graph += _bytes(2, self.name)
        graph += b"".join(_bytes(5, t) for t in self._initializers)
        graph += b"".join(_bytes(11, v) for v in self._inputs)
        graph += b"".join(_bytes(12, v) for v in self._outputs)
        return graph

    def to_bytes(self, opset: int = 17, ir_version: int = 8, producer: str = "onnxpipe") -> bytes:
        """Serialize as a ModelProto importing the default domain at ``opset``."""
        opset_id = _bytes(1, "") + _int(2, opset)
        return _int(1, ir_version) + _bytes(2, producer) + _bytes(7, self.encode()) + _bytes(8, opset_id)
