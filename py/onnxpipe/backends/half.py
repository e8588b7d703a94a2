"""IEEE 754 half precision in pure Python (struct format ``'e'``), for engines without numpy.

onnxruntime-web takes float16 tensor data as a Uint16Array of half bits (or a Float16Array
where the JavaScript engine has one), and JavaScript before Float16Array cannot round a number
to half precision itself; so Python packs and unpacks the bits. Rounding is to nearest, ties to
even, as numpy's ``astype(float16)``; values beyond the half range become +-inf as in numpy
(struct itself refuses them).
"""

from __future__ import annotations

import math
import struct
from array import array
from typing import Iterable

# Smallest magnitude that rounds past the largest half (65504) to infinity.
_OVERFLOW = 65520.0


def _finite_or_inf(value: float) -> float:
    value = float(value)
    if abs(value) >= _OVERFLOW and not math.isinf(value):
        return math.copysign(math.inf, value)
    return value


def to_bits(values: Iterable[float]) -> list[int]:
    """Half-precision bit patterns (uint16) of ``values``, rounded to nearest even."""
    floats = [_finite_or_inf(v) for v in values]
    n = len(floats)
    return list(struct.unpack(f"<{n}H", struct.pack(f"<{n}e", *floats)))


def from_bytes(data: bytes) -> list[float]:
    """The values of little-endian half-precision ``data`` (2 bytes each), exactly."""
    if len(data) % 2:
        raise ValueError(f"float16 data: expected an even number of bytes, got {len(data)}")
    return list(struct.unpack(f"<{len(data) // 2}e", data))


def to_float32(data: bytes) -> array:
    """Half-precision ``data`` widened to an ``array('f')`` (exact: every half is a float32)."""
    return array("f", from_bytes(data))
