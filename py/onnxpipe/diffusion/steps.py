"""What every scheduler is: settings checked at load, a plan for N steps (timesteps, the model
input's divisor and the update's coefficients per step, all float32 scalars), and its update
x_t -> x_{t-1} written as a small ONNX graph, so latents stay in the engine.

The step graph takes ``x`` (the latents), the denoiser's prediction and ``c`` (the step's
coefficients, float32 [k]); with classifier-free guidance it first combines the two halves,
``uncond + scale * (cond - uncond)``, as diffusers' pipelines do: from one batch-of-2 output
(``batched``) or from two outputs (``two_calls``, for a denoiser whose batch is fixed to 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ops.proto import Graph
from .settings import Key, resolve

GUIDANCE_MODES = ("none", "batched", "two_calls")


@dataclass(frozen=True)
class Plan:
    timesteps: list[float]                              # the denoiser's timestep per step
    init_noise_sigma: float                             # the initial noise is scaled by this
    steps: list[tuple[float, float, list[float]]]       # (timestep, input divisor, coefficients)
    sigmas: list[float] | None = None                   # Euler's noise levels (for tests and docs)


class StepScheduler:
    name: ClassVar[str]
    diffusers_class: ClassVar[str]
    KEYS: ClassVar[dict[str, Key]]
    COEFFICIENTS: ClassVar[tuple[str, ...]]   # names of the step graph's coefficients, in order

    def __init__(self, given: dict | None, file: str = "pipeline.json",
                 path: str = "$.generation.denoising.scheduler_config"):
        self.settings = resolve(self.KEYS, given or {}, self.name, self.diffusers_class, file, path)

    def plan(self, num_steps: int) -> Plan:
        raise NotImplementedError

    def update(self, g: Graph, x: str, m: str, c: dict[str, str]) -> str:
        """Add the update's nodes to ``g``; returns the name of the new latents."""
        raise NotImplementedError

    def step_graph(self, guidance: str) -> bytes:
        """The step as an ONNX graph: inputs x, the prediction(s) (m; or m [2B, ...] batched; or
        m_uncond, m_cond), g (guidance scale, float32 scalar, unless "none"), c; output y."""
        g = Graph(f"{self.name}_step_{guidance}")
        dims = ["b", "c", "h", "w"]
        x = g.input("x", "float32", dims)
        k = len(self.COEFFICIENTS)
        coeffs = g.input("c", "float32", [k])
        names = {}
        for i, name in enumerate(self.COEFFICIENTS):
            index = g.const(f"i_{name}", [i], "int64", [])
            names[name] = g.node("Gather", [coeffs, index], f"k_{name}", axis=0)
        if guidance == "none":
            m = g.input("m", "float32", dims)
        else:
            scale = g.input("g", "float32", [])
            if guidance == "batched":
                pair = g.input("m", "float32", ["b2", "c", "h", "w"])
                # opset 17 Split with no sizes: equal halves (diffusers' chunk(2))
                uncond, cond = g.node("Split", [pair], ["m_uncond", "m_cond"], axis=0)
            else:
                uncond = g.input("m_uncond", "float32", dims)
                cond = g.input("m_cond", "float32", dims)
            gap = g.node("Sub", [cond, uncond], "gap")
            m = g.node("Add", [uncond, g.node("Mul", [scale, gap], "scaled_gap")], "guided")
        y = self.update(g, x, m, names)
        g.output(y, "float32", dims)
        return g.to_bytes()


def input_graph(duplicate: bool) -> bytes:
    """The denoiser's latent input: x / d (diffusers' scale_model_input; also the final phase's
    latents / scaling_factor); ``duplicate`` stacks it twice along dim 0 for batched guidance."""
    g = Graph("model_input_x2" if duplicate else "model_input")
    dims = ["b", "c", "h", "w"]
    x = g.input("x", "float32", dims)
    d = g.input("d", "float32", [])
    if duplicate:   # diffusers: torch.cat([latents] * 2), then the division
        both = g.node("Concat", [x, x], "both", axis=0)
        g.node("Div", [both, d], "y")
        g.output("y", "float32", ["b2", "c", "h", "w"])
    else:
        g.node("Div", [x, d], "y")
        g.output("y", "float32", dims)
    return g.to_bytes()
