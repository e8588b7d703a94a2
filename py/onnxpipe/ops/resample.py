"""Resampling a waveform to another rate, as a small ONNX graph the runtime runs.

``resample_graph(source_rate, target_rate, hop)``: input ``x`` f32[1, n] at ``source_rate``;
outputs ``y`` f32[1, floor(n * target / source)] at ``target_rate`` and ``energy`` f32[frames],
the mean square of ``y`` over consecutive ``hop``-sample frames (the last one zero-padded), from
which a caller finds quiet points without reading every sample in Python.

Method (pure Python setup, no numpy, so the graph is built in Pyodide too): upsample by an
integer L (``ConvTranspose`` with stride L, i.e. zeros inserted between samples, and a
windowed-sinc low-pass whose cutoff is the lower of the two rates' Nyquist, which removes the
images of the upsampling and the band the target rate can't hold), then linear interpolation
(``Resize``) at the output sample times t = k / target_rate. L makes the fine grid at least
``OVERSAMPLE`` times the target rate, so linear interpolation's error stays small. A source
rate that is a whole multiple of the target is filtered and decimated by a strided ``Conv``.
"""

from __future__ import annotations

import math
from functools import lru_cache

from .proto import Graph

__all__ = ["fir_lowpass", "resample_graph"]

ZERO_CROSSINGS = 16   # filter half-width in periods of its cutoff: the steepness of the transition
OVERSAMPLE = 4        # the fine grid is at least this many times the target rate


def fir_lowpass(cutoff: float, half_width: int) -> list[float]:
    """Taps (2 * half_width + 1, unit DC gain) of a Blackman-windowed sinc low-pass with
    ``cutoff`` in cycles per sample (0 < cutoff <= 0.5)."""
    taps = []
    n = 2 * half_width + 1
    for i in range(n):
        t = i - half_width
        ideal = 2 * cutoff if t == 0 else math.sin(2 * math.pi * cutoff * t) / (math.pi * t)
        w = 0.42 - 0.5 * math.cos(2 * math.pi * i / (n - 1)) + 0.08 * math.cos(4 * math.pi * i / (n - 1))
        taps.append(ideal * w)
    total = sum(taps)
    return [v / total for v in taps]


def _upsample_filtered(g: Graph, x: str, factor: int, cutoff: float) -> str:
    """x [1, 1, n] -> [1, 1, n * factor]: zeros between samples and the low-pass (``cutoff`` in
    cycles per fine-grid sample, DC gain ``factor``), aligned so sample j sits at time j / factor."""
    half = max(math.ceil(ZERO_CROSSINGS / (2 * cutoff)), factor - 1)
    taps = [v * factor for v in fir_lowpass(cutoff, half)]
    g.const("taps", taps, "float32", [1, 1, len(taps)])
    return g.node("ConvTranspose", [x, "taps"], "fine", strides=[factor], pads=[half, half + 1 - factor])


@lru_cache(maxsize=None)
def resample_graph(source_rate: int, target_rate: int, hop: int = 160) -> bytes:
    """The graph described in the module docstring (identity resampling when the rates match)."""
    for name, value in (("source_rate", source_rate), ("target_rate", target_rate), ("hop", hop)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    g = Graph("resample")
    g.input("x", "float32", [1, "n"])
    if source_rate == target_rate:
        y = g.node("Identity", ["x"], "y")
    elif source_rate % target_rate == 0:   # a whole ratio: filter and keep every k-th sample
        g.const("axis1", [1], "int64", [1])
        ratio = source_rate // target_rate
        cutoff = 0.5 / ratio
        half = math.ceil(ZERO_CROSSINGS / (2 * cutoff))
        g.const("taps", fir_lowpass(cutoff, half), "float32", [1, 1, 2 * half + 1])
        x = g.node("Conv", [g.node("Unsqueeze", ["x", "axis1"], "x3"), "taps"], "decimated",
                   pads=[half, half], strides=[ratio])
        y = g.node("Squeeze", [x, "axis1"], "y")
    else:
        g.const("axis1", [1], "int64", [1])
        factor = max(1, math.ceil(OVERSAMPLE * target_rate / source_rate))
        x = g.node("Unsqueeze", ["x", "axis1"], "x3")
        x = _upsample_filtered(g, x, factor, 0.5 * min(source_rate, target_rate) / (factor * source_rate))
        g.const("roi", [], "float32", [0])
        g.const("scales", [1.0, 1.0, target_rate / (factor * source_rate)], "float32", [3])
        x = g.node("Resize", [x, "roi", "scales"], "interpolated", mode="linear",
                   coordinate_transformation_mode="asymmetric")
        y = g.node("Squeeze", [x, "axis1"], "y")
    # energy per hop-sample frame: pad y to a whole number of frames, square, mean per row
    g.const("hop", [hop], "int64", [1])
    g.const("zero_i", [0], "int64", [1])
    g.const("minus_one", [-1], "int64", [1])
    length = g.node("Shape", [y], "length", start=1)
    pad = g.node("Mod", [g.node("Sub", ["hop", g.node("Mod", [length, "hop"], "rem")], "short"), "hop"],
                 "pad")
    pads = g.node("Concat", ["zero_i", "zero_i", "zero_i", pad], "pads", axis=0)
    padded = g.node("Pad", [y, pads], "padded")
    frames = g.node("Reshape", [padded, g.node("Concat", ["minus_one", "hop"], "frame_shape", axis=0)],
                    "frames")
    g.node("ReduceMean", [g.node("Mul", [frames, frames], "squares")], "energy", axes=[1], keepdims=0)
    g.output("y", "float32", [1, "m"])
    g.output("energy", "float32", ["frames"])
    return g.to_bytes()
