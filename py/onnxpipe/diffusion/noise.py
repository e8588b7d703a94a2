"""The initial noise: a counter-based generator, the same numbers in CPython and in Pyodide.

Value i of a seed: pair k = i // 2 takes two uniforms u1, u2 in (0, 1] from SplitMix64's
output function applied to ``key + (2k + 1) * G`` and ``key + (2k + 2) * G`` (G = 0x9E3779B97F4A7C15,
key = mix(seed)), each as (top 53 bits + 1) / 2^53; Box-Muller gives
z0 = sqrt(-2 ln u1) cos(2 pi u2) (value 2k) and z1 = sqrt(-2 ln u1) sin(2 pi u2) (value 2k + 1),
rounded to float32. No state is carried: any value can be computed alone, and the numbers
do not depend on the shape they fill. (A libm differing by one ulp in log/cos could flip a
float32 rounding once in hundreds of millions of values; none was seen.)
"""

from __future__ import annotations

import math

from .f32 import f32

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def normal(seed: int, count: int) -> list[float]:
    """``count`` standard normal float32 values for ``seed`` (any integer >= 0)."""
    key = _mix(seed & _MASK)
    out: list[float] = []
    scale = 2.0 ** -53
    two_pi = 2.0 * math.pi
    for k in range((count + 1) // 2):
        u1 = ((_mix((key + (2 * k + 1) * _GOLDEN) & _MASK) >> 11) + 1) * scale
        u2 = ((_mix((key + (2 * k + 2) * _GOLDEN) & _MASK) >> 11) + 1) * scale
        r = math.sqrt(-2.0 * math.log(u1))
        out.append(f32(r * math.cos(two_pi * u2)))
        out.append(f32(r * math.sin(two_pi * u2)))
    return out[:count]


def initial_latents(seed: int, count: int, init_noise_sigma: float) -> list[float]:
    """The first latents: noise times the scheduler's init_noise_sigma (a float32 product)."""
    sigma = f32(init_noise_sigma)
    return [f32(v * sigma) for v in normal(seed, count)]
