"""Read a CTranslate2 ``model.bin`` (binary format 6) into named arrays, pure struct parsing.

The layout, as CTranslate2 writes it: uint32 binary version, the spec name (uint16 length
counting a trailing NUL, the bytes, NUL), uint32 spec revision, uint32 variable count, then per
variable its name, uint8 rank, uint32 dims, uint8 dtype id (float32, int8, int16, int32,
float16, bfloat16 in that order), uint32 byte count and the raw little-endian data; last a
uint32 alias count and (alias, target) name pairs. The file may come in pieces (the PyPI
packages split it in two): ``read_model`` reads them as one stream.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUPPORTED_VERSIONS = (5, 6)
_DTYPES = (np.float32, np.int8, np.int16, np.int32, np.float16, None)   # None: bfloat16


@dataclass
class CT2Model:
    spec: str                         # e.g. "WhisperSpec"
    revision: int
    variables: dict[str, np.ndarray]  # scalars (attributes such as num_heads) are 0-d arrays
    aliases: dict[str, str]

    def get(self, name: str) -> np.ndarray:
        return self.variables[self.aliases.get(name, name)]


class _Pieces(io.RawIOBase):
    """Several files read as one stream (the model.bin halves)."""

    def __init__(self, paths):
        self._files = [open(p, "rb") for p in paths]
        self._i = 0

    def readable(self):
        return True

    def readinto(self, buf):
        while self._i < len(self._files):
            n = self._files[self._i].readinto(buf)
            if n:
                return n
            self._i += 1
        return 0

    def close(self):
        for f in self._files:
            f.close()
        super().close()


def _exact(stream, n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise ValueError(f"model.bin ends early: wanted {n} bytes, got {len(data)}")
    return data


def _u(stream, fmt: str) -> int:
    return struct.unpack("<" + fmt, _exact(stream, struct.calcsize(fmt)))[0]


def _string(stream) -> str:
    length = _u(stream, "H")
    return _exact(stream, length)[:-1].decode("utf-8")


def read_model(paths) -> CT2Model:
    """Parse ``paths`` (one model.bin, or its pieces in order) into a CT2Model."""
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
    with io.BufferedReader(_Pieces(paths), 1 << 20) as stream:
        version = _u(stream, "I")
        if version not in SUPPORTED_VERSIONS:
            raise ValueError(f"{paths[0]}: CTranslate2 binary version {version}, expected one of "
                             f"{SUPPORTED_VERSIONS}")
        spec = _string(stream)
        revision = _u(stream, "I")
        variables = {}
        for _ in range(_u(stream, "I")):
            name = _string(stream)
            rank = _u(stream, "B")
            shape = tuple(_u(stream, "I") for _ in range(rank))
            type_id = _u(stream, "B")
            size = _u(stream, "I")
            raw = _exact(stream, size)
            dtype = _DTYPES[type_id] if type_id < len(_DTYPES) else None
            if dtype is None:
                if type_id != 5:
                    raise ValueError(f"{name}: unknown CTranslate2 dtype id {type_id}")
                as_u32 = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
                variables[name] = as_u32.view(np.float32).reshape(shape)
            else:
                variables[name] = np.frombuffer(raw, dtype).reshape(shape)
        aliases = {}
        for _ in range(_u(stream, "I")):
            alias = _string(stream)
            aliases[alias] = _string(stream)
        if stream.read(1):
            raise ValueError(f"{paths[-1]}: unexpected bytes after the alias table")
    return CT2Model(spec, revision, variables, aliases)
