"""Open a model file's graph: natively from disk, in the browser over a range-read function.

Both go through ``BlockSource``: the reader asks for byte ranges, so a multi-gigabyte model
with inline weights costs a read of its graph structure, not of its weights.
"""

from __future__ import annotations

import os
from ..errors import BundleError
from .model import ModelInfo, parse_model
from .wire import BlockSource, Span, WireError


class FileSource(BlockSource):
    """Range reads from a local file (kept open until ``close``)."""

    def __init__(self, path: str):
        self.path = path
        self._file = open(path, "rb")
        super().__init__(self._read, os.fstat(self._file.fileno()).st_size)

    def _read(self, offset: int, n: int) -> bytes:
        self._file.seek(offset)
        return self._file.read(n)

    def close(self) -> None:
        self._file.close()


def read_model(source, where: str = "model") -> ModelInfo:
    """The graph structure of the ONNX model behind ``source`` (``size`` and ``read(offset, n)``);
    ``where`` names it in errors."""
    try:
        return parse_model(Span(source, 0, source.size))
    except WireError as exc:
        raise BundleError(f"{where}: not a readable ONNX model: {exc}") from None


def read_model_file(path: str) -> ModelInfo:
    source = FileSource(path)
    try:
        return read_model(source, path)
    finally:
        source.close()
