"""Float32 arithmetic in pure Python (no numpy: this runs in Pyodide too).

diffusers builds its schedules from float32 tensors; rounding to float32 where it does keeps
our timesteps, sigmas and step coefficients equal to its own, not just close.
"""

from __future__ import annotations

import math
import struct

_F = struct.Struct("<f")


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32 (as a Python float)."""
    return _F.unpack(_F.pack(x))[0]


def sqrt32(x: float) -> float:
    """float32 square root of a float32 value (correctly rounded, as torch's ``** 0.5``)."""
    return f32(math.sqrt(x))


def linspace32(start: float, end: float, count: int) -> list[float]:
    """torch.linspace(start, end, count, dtype=float32): float32 steps, filled from both ends."""
    start, end = f32(start), f32(end)
    if count == 1:
        return [start]
    step = f32((end - start) / (count - 1))
    half = count // 2
    return [f32(start + f32(step * i)) if i < half else f32(end - f32(step * (count - 1 - i)))
            for i in range(count)]


def interp(x: float, xp_len: int, fp: list[float]) -> float:
    """numpy.interp(x, arange(xp_len), fp) in float64 (x inside [0, xp_len - 1])."""
    if x <= 0:
        return fp[0]
    if x >= xp_len - 1:
        return fp[-1]
    j = int(math.floor(x))
    if x == j:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / 1.0
    return slope * (x - j) + fp[j]
