"""Re-encode an ONNX model with every weight outside its graph, and chosen nodes replaced.

onnxruntime-web copies a model's bytes into its 4 GB WASM heap and parses them there, so a
file with inline weights sits in the heap several times over while a session is made; weights
in external data are copied in once, tensor by tensor, from buffers outside the heap. This
writes a small graph whose initializers all point at byte ranges: of the original model file
itself (inline weights), of its data files, or of buffers the caller makes (``NewTensor``:
weights rewritten at load, heap/nbits.py). Ranges are grouped into chunks of at most
``chunk_bytes`` (one buffer per chunk, never one for a multi-gigabyte file), each chunk a named
slice of a bundle file (``EditedModel.mounts``). Everything the edit does not touch is copied
byte for byte. Pure Python over range reads (onnx_info/wire.py); it never reads a weight.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from ..errors import BundleError
from ..onnx_info.model import DTYPE_NAMES, _node
from ..onnx_info.wire import LEN, Span, extents, fields, ints
from ..ops.proto import int_field, len_field

CHUNK_BYTES = 512 << 20     # the largest buffer one mount needs (one tensor may exceed it alone)
INLINE_BYTES = 1024         # initializers with fewer data bytes stay inside the graph
MOUNT_DIR = "onnxpipe-weights"
# element sizes in bytes (4-bit types: half a byte, counted by the caller)
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "uint64": 8,
                 "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1}


@dataclass(frozen=True)
class Slice:
    """Bytes ``start`` to ``end`` of the bundle file ``file``."""

    file: str
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Weight:
    """An initializer of the source graph and where its data lies."""

    name: str
    dtype: str | None
    dims: tuple[int, ...]
    data: Slice | None        # None: written in typed fields, not raw bytes (small constants)
    inline: bool = False      # its data sits inside the model file

    @property
    def nbytes(self) -> int:
        return self.data.length if self.data is not None else 0

    @property
    def stays_in_graph(self) -> bool:
        """Small inline weights are copied with the graph instead of mounted."""
        return self.data is None or (self.inline and self.data.length < INLINE_BYTES)


@dataclass(frozen=True)
class NewTensor:
    """An initializer the edit adds, its bytes made by the caller under mount ``location``."""

    name: str
    dtype: str
    dims: tuple[int, ...]
    location: str
    nbytes: int


@dataclass
class EditedModel:
    model: bytes                                   # the ModelProto to open
    mounts: dict[str, Slice] = field(default_factory=dict)   # location -> bytes of a bundle file
    weights: dict[str, int] = field(default_factory=dict)    # initializer -> bytes it takes in the heap

    @property
    def weight_bytes(self) -> int:
        return sum(self.weights.values())


def _external_data(span: Span) -> dict[str, str]:
    out = {}
    for num, wire, value in fields(span):
        if num == 13 and wire == LEN:
            key = val = ""
            for n, w, v in fields(value):
                if n == 1 and w == LEN:
                    key = v.text()
                elif n == 2 and w == LEN:
                    val = v.text()
            out[key] = val
    return out


def read_weight(span: Span, model_file: str) -> Weight:
    """An initializer's name, type, dims and data range (inline in ``model_file``, or in the
    external file it names, resolved beside ``model_file``)."""
    dims: list[int] = []
    name, code, raw, external = "", 0, None, False
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
    dtype = DTYPE_NAMES.get(code)
    if external:
        entries = _external_data(span)
        location = entries.get("location", "")
        if not location or location.startswith("/") or ".." in location.split("/"):
            raise BundleError(f"{model_file}: initializer {name!r} names external data {location!r}; "
                              "expected a file beside the model")
        offset = int(entries.get("offset", "0") or 0)
        length = entries.get("length")
        data_file = posixpath.join(posixpath.dirname(model_file), location)
        if length is None:
            raise BundleError(f"{model_file}: initializer {name!r} gives no length for its external data")
        return Weight(name, dtype, tuple(dims), Slice(data_file, offset, offset + int(length)))
    if raw is not None:
        return Weight(name, dtype, tuple(dims), Slice(model_file, raw.offset, raw.offset + raw.length), inline=True)
    return Weight(name, dtype, tuple(dims), None)


def _strip_data(span: Span) -> bytes:
    """A TensorProto's fields but its data and data location (copied as they are)."""
    out = bytearray()
    for num, _, _, start, end in extents(span):
        if num not in (9, 13, 14):
            out += span.source.read(start, end - start)
    return bytes(out)


def _external(header: bytes, location: str, offset: int, length: int) -> bytes:
    entry = lambda k, v: len_field(13, len_field(1, k) + len_field(2, v))   # noqa: E731
    return (header + entry("location", location) + entry("offset", str(offset)) + entry("length", str(length))
            + int_field(14, 1))


class _Chunks:
    """Groups weight ranges into mountable chunks: ranges of one file, in order, at most
    CHUNK_BYTES per chunk unless one range alone is larger."""

    def __init__(self, chunk_bytes: int):
        self.chunk_bytes = chunk_bytes

    def assign(self, weights: list[Weight]) -> tuple[dict[str, tuple[str, int]], dict[str, Slice]]:
        """(initializer -> (location, offset in it), location -> Slice)."""
        by_file: dict[str, list[Weight]] = {}
        for w in weights:
            by_file.setdefault(w.data.file, []).append(w)
        where, mounts = {}, {}
        for file, group in by_file.items():
            group.sort(key=lambda w: w.data.start)
            current: list[Weight] = []

            def close():
                if current:
                    start, end = current[0].data.start, max(w.data.end for w in current)
                    location = f"{MOUNT_DIR}/{len(mounts)}.bin"
                    mounts[location] = Slice(file, start, end)
                    for w in current:
                        where[w.name] = (location, w.data.start - start)
                    current.clear()
            for w in group:
                if current and w.data.end - current[0].data.start > self.chunk_bytes:
                    close()
                current.append(w)
            close()
        return where, mounts


@dataclass(frozen=True)
class Subgraph:
    """The part of a graph one session runs (heap/shards.py): the nodes kept (by first output),
    the graph inputs and outputs it has, and the element type of the ones it adds."""

    keep: frozenset[str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dtypes: dict[str, str] = field(default_factory=dict, hash=False)   # of the values parts hand on
    internal: frozenset[str] = frozenset()   # values handed between parts that the whole graph does not output


def edit_model(source, model_file: str, replace: dict[str, list[bytes]] | None = None,
               add: list[NewTensor] = (), drop: set[str] = frozenset(),
               chunk_bytes: int = CHUNK_BYTES, part: Subgraph | None = None) -> EditedModel:
    """The model behind ``source`` (``size``, ``read(offset, n)``; bundle path ``model_file``)
    with every weight external, the nodes whose first output is a key of ``replace`` replaced
    by the encoded NodeProtos given, ``add`` appended and the initializers in ``drop`` left out.
    Nodes inside subgraphs (an If's branches) are replaced too. ``part``: only those nodes, the
    weights they read, and those inputs and outputs."""
    replace = replace or {}
    root = Span(source, 0, source.size)
    graphs = [value for num, wire, value in fields(root) if num == 7 and wire == LEN]
    if len(graphs) != 1:
        raise BundleError(f"{model_file}: not an ONNX model (expected one graph, found {len(graphs)})")
    if part is not None:
        drop = set(drop) | _unread(graphs[0], part)
    weights: list[Weight] = []
    _collect(graphs[0], model_file, drop, weights)
    where, mounts = _Chunks(chunk_bytes).assign([w for w in weights if not w.stays_in_graph])
    edited = EditedModel(b"", mounts, {w.name: w.nbytes for w in weights})
    out = bytearray()
    for num, wire, value, start, end in extents(root):
        if num == 7 and wire == LEN:
            out += len_field(7, _graph(value, replace, drop, where, add, part=part))
        else:
            out += source.read(start, end - start)
    for t in add:
        edited.weights[t.name] = t.nbytes
    edited.model = bytes(out)
    return edited


def weights_in(source, model_file: str) -> dict[str, Weight]:
    """Every initializer of the model behind ``source``, subgraphs' included, by name."""
    root = Span(source, 0, source.size)
    out: list[Weight] = []
    for num, wire, value in fields(root):
        if num == 7 and wire == LEN:
            _collect(value, model_file, frozenset(), out)
    return {w.name: w for w in out}


def _collect(graph: Span, model_file: str, drop: set[str], out: list[Weight]) -> None:
    for num, wire, value in fields(graph):
        if num == 5 and wire == LEN:
            w = read_weight(value, model_file)
            if w.name not in drop:
                out.append(w)
        elif num == 1 and wire == LEN:
            for sub in _subgraphs(value):
                _collect(sub, model_file, drop, out)


def _subgraphs(node: Span) -> list[Span]:
    found = []
    for num, wire, value in fields(node):
        if num == 5 and wire == LEN:
            found.extend(v for n, w, v in fields(value) if n == 6 and w == LEN)
    return found


def _unread(graph: Span, part: Subgraph) -> set[str]:
    """Initializers no node of ``part`` reads."""
    read: set[str] = set()
    names: set[str] = set()
    for num, wire, value in fields(graph):
        if num == 1 and wire == LEN:
            node = value.message()
            outputs = [v.text() for n, w, v in fields(node) if n == 2 and w == LEN]
            if outputs and outputs[0] in part.keep:
                read.update(v.text() for n, w, v in fields(node) if n == 1 and w == LEN)
        elif num == 5 and wire == LEN:
            names.add(_name_of(value))
    return names - read


def _value_name(span: Span) -> str:
    """A ValueInfoProto's name (field 1)."""
    for num, wire, value in fields(span):
        if num == 1 and wire == LEN:
            return value.text()
    return ""


def _typed_value(name: str, dtype: str) -> bytes:
    """A ValueInfoProto of a tensor of ``dtype`` and unknown shape."""
    return len_field(1, name) + len_field(2, len_field(1, int_field(1, _code(dtype))))


def _graph(span: Span, replace, drop, where, add, top: bool = True, part: Subgraph | None = None) -> bytes:
    out = bytearray()
    seen_io: set[str] = set()
    for num, wire, value, start, end in extents(span):
        if part is not None and num in (1, 11, 12, 13) and wire == LEN:
            if num == 13:
                continue   # shape hints: optional, and some name values that are inputs here
            name = _value_name(value) if num != 1 else None
            if num == 1:
                outs = [v.text() for n, w, v in fields(value.message()) if n == 2 and w == LEN]
                if not outs or outs[0] not in part.keep:
                    continue
            elif name not in (part.inputs if num == 11 else part.outputs):
                continue
            else:
                seen_io.add(name)
        if num == 1 and wire == LEN:
            out += _node_field(value, start, end, replace, drop, where, add)
        elif num == 5 and wire == LEN:
            header = _strip_data(value)
            name = _name_of(value)
            if name in drop:
                continue
            if name in where:
                location, offset = where[name]
                length = _data_length(value)
                out += len_field(5, _external(header, location, offset, length))
            else:
                out += span.source.read(start, end - start)
        else:
            out += span.source.read(start, end - start)
    if part is not None:
        for name in part.inputs:
            if name not in seen_io:
                out += len_field(11, _typed_value(name, part.dtypes[name]))
        for name in part.outputs:
            if name not in seen_io:
                out += len_field(12, _typed_value(name, part.dtypes[name]))
    if top:
        for t in add:
            header = b"".join(int_field(1, d) for d in t.dims) + int_field(2, _code(t.dtype)) + len_field(8, t.name)
            out += len_field(5, _external(header, t.location, 0, t.nbytes))
    return bytes(out)


def _name_of(span: Span) -> str:
    for num, wire, value in fields(span):
        if num == 8 and wire == LEN:
            return value.text()
    return ""


def _data_length(span: Span) -> int:
    """Bytes of an initializer's data, inline or external."""
    for num, wire, value in fields(span):
        if num == 9 and wire == LEN:
            return value.length
    return int(_external_data(span).get("length", "0"))


def _code(dtype: str) -> int:
    for code, name in DTYPE_NAMES.items():
        if name == dtype:
            return code
    raise ValueError(f"unknown dtype {dtype!r}")


def _node_field(value: Span, start: int, end: int, replace, drop, where, add) -> bytes:
    node = value.message()
    outputs = [v.text() for n, w, v in fields(node) if n == 2 and w == LEN]
    if outputs and outputs[0] in replace:
        return b"".join(len_field(1, encoded) for encoded in replace[outputs[0]])
    if not _subgraphs(value):
        return value.source.read(start, end - start)
    # a node holding subgraphs: its attributes re-encoded with the edited graphs
    body = bytearray()
    for num, wire, v, s, e in extents(value):
        if num == 5 and wire == LEN and any(n == 6 for n, _, _ in fields(v)):
            attr = bytearray()
            for an, aw, av, as_, ae in extents(v):
                if an == 6 and aw == LEN:
                    attr += len_field(6, _graph(av, replace, drop, where, add, top=False))
                else:
                    attr += v.source.read(as_, ae - as_)
            body += len_field(5, bytes(attr))
        else:
            body += value.source.read(s, e - s)
    return len_field(1, bytes(body))


def node_of(span: Span):
    """The onnx_info Node of a NodeProto span (for callers that plan replacements)."""
    return _node(span.message())
