"""Protobuf wire format, read over a random-access source (standard library only).

A model file may be gigabytes of inline weights around a few hundred kilobytes of graph, so
nothing here reads a message whole: ``fields`` walks one message's fields and hands back each
length-delimited field as a ``Span`` (where it is, how long), which the caller decodes,
descends into, or skips without reading. ops/proto.py is the matching writer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5   # the wire types ONNX uses (groups, 3 and 4, are obsolete)
BLOCK = 64 * 1024                    # bytes fetched per source read; graphs are read in order
SMALL = 1 << 20                      # messages up to this size are fetched whole, then parsed


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message (truncated, or not ONNX at all)."""


class BytesSource:
    """A source over bytes already in memory (a small message, a model built in a test)."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        self.size = len(self.data)

    def read(self, offset: int, n: int) -> bytes:
        return self.data[offset:offset + n]


class BlockSource:
    """A source over ``read_range(offset, n) -> bytes`` that fetches aligned ``BLOCK``s and keeps
    the last few, so walking a graph costs few range reads and skipping a payload costs none.
    ``bytes_fetched`` counts what was actually read (tests check that weights were skipped)."""

    def __init__(self, read_range: Callable[[int, int], bytes], size: int, keep: int = 4):
        self.read_range = read_range
        self.size = size
        self.keep = keep
        self.bytes_fetched = 0
        self._blocks: dict[int, bytes] = {}

    def _block(self, index: int) -> bytes:
        block = self._blocks.get(index)
        if block is None:
            start = index * BLOCK
            block = bytes(self.read_range(start, min(BLOCK, self.size - start)))
            self.bytes_fetched += len(block)
            if len(self._blocks) >= self.keep:
                self._blocks.pop(next(iter(self._blocks)))
            self._blocks[index] = block
        return block

    def read(self, offset: int, n: int) -> bytes:
        n = max(0, min(n, self.size - offset))
        first, last = offset // BLOCK, (offset + n - 1) // BLOCK
        if n == 0:
            return b""
        if first == last:
            start = offset - first * BLOCK
            return self._block(first)[start:start + n]
        if n > 2 * BLOCK:   # one big direct read instead of churning the cache
            self.bytes_fetched += n
            return bytes(self.read_range(offset, n))
        parts = [self._block(i) for i in range(first, last + 1)]
        start = offset - first * BLOCK
        return b"".join(parts)[start:start + n]


@dataclass(frozen=True)
class Span:
    """A length-delimited field's payload: ``length`` bytes at ``offset`` of ``source``."""

    source: object
    offset: int
    length: int

    def bytes(self) -> bytes:
        data = self.source.read(self.offset, self.length)
        if len(data) != self.length:
            raise WireError(f"truncated field: {self.length} bytes at offset {self.offset}, "
                            f"the file has {len(data)}")
        return data

    def text(self) -> str:
        return self.bytes().decode("utf-8", errors="replace")

    def message(self) -> "Span":
        """The same span, fetched into memory first when small (nested messages are parsed
        field by field, and one read beats many)."""
        if self.length <= SMALL and not isinstance(self.source, BytesSource):
            return Span(BytesSource(self.bytes()), 0, self.length)
        return self


def _varint(source, pos: int, end: int) -> tuple[int, int]:
    chunk = source.read(pos, min(10, end - pos))
    result = shift = 0
    for i, b in enumerate(chunk):
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + i + 1
        shift += 7
    raise WireError(f"truncated or overlong varint at offset {pos}")


def signed64(n: int) -> int:
    """A varint read as int64 (negative values are ten-byte two's complement)."""
    return n - (1 << 64) if n >= 1 << 63 else n


def fields(span: Span) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of each field: an int for VARINT, raw bytes for I32/I64,
    a ``Span`` for LEN (not read)."""
    for field, wire, value, _, _ in extents(span):
        yield field, wire, value


def extents(span: Span) -> Iterator[tuple[int, int, object, int, int]]:
    """``fields`` plus where each field starts and ends in the source (its key included), so a
    writer can copy a field it does not change byte for byte (heap/graph_edit.py)."""
    source, pos, end = span.source, span.offset, span.offset + span.length
    while pos < end:
        start = pos
        key, pos = _varint(source, pos, end)
        field, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _varint(source, pos, end)
        elif wire == LEN:
            length, pos = _varint(source, pos, end)
            if pos + length > end:
                raise WireError(f"field {field} at offset {pos} runs {pos + length - end} bytes past "
                                "its message")
            value = Span(source, pos, length)
            pos += length
        elif wire == I64:
            value, pos = source.read(pos, 8), pos + 8
        elif wire == I32:
            value, pos = source.read(pos, 4), pos + 4
        else:
            raise WireError(f"unsupported wire type {wire} (field {field}) at offset {pos}")
        yield field, wire, value, start, pos


def ints(wire: int, value) -> list[int]:
    """A repeated integer field's values, written packed (one LEN) or one per field."""
    if wire == VARINT:
        return [signed64(value)]
    out, data = [], BytesSource(value.bytes())
    pos, end = 0, value.length
    while pos < end:
        n, pos = _varint(data, pos, end)
        out.append(signed64(n))
    return out


def floats(wire: int, value, fmt: str = "f") -> list[float]:
    """A repeated float (``"f"``) or double (``"d"``) field, packed or not."""
    data = value if wire in (I32, I64) else value.bytes()
    size = struct.calcsize(fmt)
    return list(struct.unpack(f"<{len(data) // size}{fmt}", data))
