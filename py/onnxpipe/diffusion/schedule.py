"""The training noise schedule both schedulers share: betas -> alphas_cumprod (float32).

``beta_schedule`` "linear", "scaled_linear" and "squaredcos_cap_v2", or ``trained_betas``, as
diffusers computes them.
"""

from __future__ import annotations

import math

from .f32 import f32, linspace32


def betas(settings: dict) -> list[float]:
    n = settings["num_train_timesteps"]
    if settings["trained_betas"] is not None:
        return [f32(b) for b in settings["trained_betas"]]
    kind = settings["beta_schedule"]
    if kind == "linear":
        return linspace32(settings["beta_start"], settings["beta_end"], n)
    if kind == "scaled_linear":
        roots = linspace32(settings["beta_start"] ** 0.5, settings["beta_end"] ** 0.5, n)
        return [f32(r * r) for r in roots]
    # squaredcos_cap_v2: the cosine alpha-bar of Nichol & Dhariwal, in float64, then float32
    def bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
    return [f32(min(1 - bar((i + 1) / n) / bar(i / n), 0.999)) for i in range(n)]


def alphas_cumprod(settings: dict) -> list[float]:
    """Running product of (1 - beta): torch.cumprod on CPU accumulates in float64, stores float32."""
    out, acc = [], 1.0
    for b in betas(settings):
        acc *= f32(1.0 - b)
        out.append(f32(acc))
    return out
