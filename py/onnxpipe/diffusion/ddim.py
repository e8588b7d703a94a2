"""DDIM with eta = 0 (deterministic), as diffusers' DDIMScheduler: predict x0 (clipped to
``clip_sample_range`` when ``clip_sample``), then x_prev = sqrt(a_prev) x0 + sqrt(1 - a_prev) eps.

The model sees the latents unchanged; timesteps are integers.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..ops.proto import Graph
from .f32 import f32, sqrt32
from .schedule import alphas_cumprod
from .settings import COMMON, Key
from .steps import Plan, StepScheduler


class DDIM(StepScheduler):
    name = "ddim"
    diffusers_class = "DDIMScheduler"
    KEYS = {
        **COMMON,
        "timestep_spacing": Key("leading", "string", ("leading", "trailing", "linspace")),
        "clip_sample": Key(True, "bool"),
        "clip_sample_range": Key(1.0, "number", least=0),
        "set_alpha_to_one": Key(True, "bool"),
        "thresholding": Key(False, "bool", (False,)),
        # only read when thresholding, which is refused above
        "dynamic_thresholding_ratio": Key(0.995, "number"),
        "sample_max_value": Key(1.0, "number"),
    }
    COEFFICIENTS = ("sqrt_a", "sqrt_b", "sqrt_a_prev", "direction", "clip")

    def plan(self, num_steps: int) -> Plan:
        s = self.settings
        n = s["num_train_timesteps"]
        if num_steps > n:
            raise InputError(f"num_steps {num_steps} is more than num_train_timesteps {n}")
        ac = alphas_cumprod(s)
        spacing = s["timestep_spacing"]
        if spacing == "linspace":
            step = (n - 1) / (num_steps - 1) if num_steps > 1 else 0.0
            ts = [round(i * step) for i in range(num_steps)]
            if num_steps > 1:
                ts[-1] = n - 1
            ts.reverse()
        elif spacing == "leading":
            ratio = n // num_steps
            ts = [i * ratio + s["steps_offset"] for i in reversed(range(num_steps))]
        else:   # trailing
            ratio = n / num_steps
            ts = [round(n - i * ratio) - 1 for i in range(math.ceil(n / ratio))]
        final = 1.0 if s["set_alpha_to_one"] else ac[0]
        clip = f32(s["clip_sample_range"]) if s["clip_sample"] else float("inf")
        steps = []
        for t in ts:
            prev = t - n // num_steps
            a = ac[t]
            a_prev = ac[prev] if prev >= 0 else final
            steps.append((float(t), 1.0, [sqrt32(a), sqrt32(f32(1.0 - a)), sqrt32(a_prev),
                                          sqrt32(f32(1.0 - a_prev)), clip]))
        return Plan(timesteps=[float(t) for t in ts], init_noise_sigma=1.0, steps=steps)

    def update(self, g: Graph, x: str, m: str, c: dict[str, str]) -> str:
        kind = self.settings["prediction_type"]
        if kind == "epsilon":
            x0 = g.node("Div", [g.node("Sub", [x, g.node("Mul", [c["sqrt_b"], m], "bm")], "xb"), c["sqrt_a"]], "x0")
            eps = m
        elif kind == "v_prediction":
            x0 = g.node("Sub", [g.node("Mul", [c["sqrt_a"], x], "ax"), g.node("Mul", [c["sqrt_b"], m], "bm")], "x0")
            eps = g.node("Add", [g.node("Mul", [c["sqrt_a"], m], "am"), g.node("Mul", [c["sqrt_b"], x], "bx")], "eps")
        else:   # the model predicts x0; eps from the unclipped x0, as diffusers does
            x0 = m
            eps = g.node("Div", [g.node("Sub", [x, g.node("Mul", [c["sqrt_a"], m], "am")], "xa"), c["sqrt_b"]], "eps")
        if self.settings["clip_sample"]:
            low = g.node("Neg", [c["clip"]], "low")
            x0 = g.node("Clip", [x0, low, c["clip"]], "x0_clipped")
        direction = g.node("Mul", [c["direction"], eps], "dir")
        return g.node("Add", [g.node("Mul", [c["sqrt_a_prev"], x0], "ax0"), direction], "y")
