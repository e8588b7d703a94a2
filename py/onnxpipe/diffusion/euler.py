"""Euler discrete (k-diffusion's Euler sampler), as diffusers' EulerDiscreteScheduler with
``s_churn = 0``: x_next = x + (x - x0) / sigma * (sigma_next - sigma).

The model sees x / sqrt(sigma^2 + 1); timesteps are float (interpolated between training steps).
"""

from __future__ import annotations

import math

from ..ops.proto import Graph
from .f32 import f32, interp, sqrt32
from .schedule import alphas_cumprod
from .settings import COMMON, Key
from .steps import Plan, StepScheduler


class EulerDiscrete(StepScheduler):
    name = "euler_discrete"
    diffusers_class = "EulerDiscreteScheduler"
    KEYS = {
        **COMMON,
        "timestep_spacing": Key("linspace", "string", ("linspace", "leading", "trailing")),
        "interpolation_type": Key("linear", "string", ("linear",)),
        "use_karras_sigmas": Key(False, "bool", (False,), nullable=True),
        "use_exponential_sigmas": Key(False, "bool", (False,), nullable=True),
        "use_beta_sigmas": Key(False, "bool", (False,), nullable=True),
        # only read by the karras / exponential / beta sigmas, which are refused above
        "sigma_min": Key(None, "number", nullable=True),
        "sigma_max": Key(None, "number", nullable=True),
        "timestep_type": Key("discrete", "string", ("discrete",)),
        "final_sigmas_type": Key("zero", "string", ("zero", "sigma_min")),
    }
    COEFFICIENTS = ("sigma", "dt", "c_out", "c_skip")

    def plan(self, num_steps: int) -> Plan:
        s = self.settings
        n = s["num_train_timesteps"]
        ac = alphas_cumprod(s)
        spacing = s["timestep_spacing"]
        if spacing == "linspace":   # numpy.linspace in float64, then float32
            step = (n - 1) / (num_steps - 1) if num_steps > 1 else 0.0
            ts = [f32(i * step) for i in range(num_steps)]
            ts[-1] = float(n - 1) if num_steps > 1 else ts[-1]
            ts.reverse()
        elif spacing == "leading":
            ratio = n // num_steps
            ts = [float(i * ratio + s["steps_offset"]) for i in reversed(range(num_steps))]
        else:   # trailing: numpy.arange(n, 0, -n / num_steps), rounded, minus one
            ratio = n / num_steps
            ts = [f32(round(n - i * ratio)) - 1.0 for i in range(math.ceil(n / ratio))]
        train_sigmas = [sqrt32(f32(f32(1.0 - a) / a)) for a in ac]
        sigmas = [f32(interp(t, n, train_sigmas)) for t in ts]
        last = 0.0 if s["final_sigmas_type"] == "zero" else sqrt32(f32(f32(1.0 - ac[0]) / ac[0]))
        sigmas.append(f32(last))
        top = max(sigmas)
        init = top if spacing in ("linspace", "trailing") else sqrt32(f32(f32(top * top) + 1.0))
        steps = []
        for i, t in enumerate(ts):
            sigma = sigmas[i]
            den = f32(f32(sigma * sigma) + 1.0)
            steps.append((t, sqrt32(den), [sigma, f32(sigmas[i + 1] - sigma),
                                           f32(-sigma / sqrt32(den)), den]))
        return Plan(timesteps=ts, init_noise_sigma=init, steps=steps, sigmas=sigmas)

    def update(self, g: Graph, x: str, m: str, c: dict[str, str]) -> str:
        kind = self.settings["prediction_type"]
        if kind == "epsilon":
            x0 = g.node("Sub", [x, g.node("Mul", [c["sigma"], m], "x0_eps")], "x0")
        elif kind == "v_prediction":
            x0 = g.node("Add", [g.node("Mul", [m, c["c_out"]], "x0_v"),
                                g.node("Div", [x, c["c_skip"]], "x0_s")], "x0")
        else:
            x0 = m
        derivative = g.node("Div", [g.node("Sub", [x, x0], "diff"), c["sigma"]], "derivative")
        return g.node("Add", [x, g.node("Mul", [derivative, c["dt"]], "delta")], "y")
