"""Whisper-style log-mel features as a small ONNX graph the runtime builds and runs.

``log_mel_graph(sample_rate, n_fft, hop, n_mels, frames)``: input ``waveform`` f32[1, n];
output ``features`` f32[1, n_mels, frames], computed the way
onnxruntime-extensions' ``STFTNorm`` + ``LogMelSpectrum`` do for onnxruntime-genai's Whisper
bundles (audio_processor_config.json):

- the samples zero-padded by n_fft / 2 on both sides, n // hop frames of n_fft samples every
  ``hop`` (a periodic Hann window; the DFT as a strided ``Conv`` with cosine and sine rows),
- power |X|^2 through a Slaney-normalised mel filter bank on the Slaney mel scale (0 Hz to
  sample_rate / 2, as transformers' ``WhisperFeatureExtractor`` makes it),
- log10 of max(power, 1e-10), floored at (largest value - 8), then (x + 4) / 4,
- frames past the audio (up to ``frames``) hold that floor; audio longer than ``frames`` hops
  is cut; audio shorter than one hop gives the floor of silence everywhere.

Pure Python setup (no numpy), so the graph is built in Pyodide too.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..config.windows import hann_periodic
from .proto import Graph

__all__ = ["hann_periodic", "log_mel_graph", "mel_filters"]

_MIN_LOG_HZ, _MIN_LOG_MEL = 1000.0, 15.0
_LOG_STEP = 27.0 / math.log(6.4)   # Slaney: mels per natural-log unit of frequency above 1 kHz


def _hz_to_mel(hz: float) -> float:
    if hz < _MIN_LOG_HZ:
        return 3.0 * hz / 200.0
    return _MIN_LOG_MEL + math.log(hz / _MIN_LOG_HZ) * _LOG_STEP


def _mel_to_hz(mel: float) -> float:
    if mel < _MIN_LOG_MEL:
        return 200.0 * mel / 3.0
    return _MIN_LOG_HZ * math.exp((mel - _MIN_LOG_MEL) / _LOG_STEP)


def mel_filters(sample_rate: int, n_fft: int, n_mels: int) -> list[list[float]]:
    """[n_mels][n_fft // 2 + 1] triangular filters, Slaney scale and area normalisation."""
    bins = n_fft // 2 + 1
    nyquist = sample_rate / 2
    fft_hz = [nyquist * i / (bins - 1) for i in range(bins)]
    top = _hz_to_mel(nyquist)
    edges = [_mel_to_hz(top * i / (n_mels + 1)) for i in range(n_mels + 2)]
    rows = []
    for m in range(n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        norm = 2.0 / (hi - lo)
        rows.append([norm * max(0.0, min((f - lo) / (mid - lo), (hi - f) / (hi - mid))) for f in fft_hz])
    return rows


@lru_cache(maxsize=4)
def log_mel_graph(sample_rate: int, n_fft: int, hop: int, n_mels: int, frames: int) -> bytes:
    """The graph described in the module docstring."""
    for name, value in (("sample_rate", sample_rate), ("n_fft", n_fft), ("hop", hop),
                        ("n_mels", n_mels), ("frames", frames)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    bins = n_fft // 2 + 1
    window = hann_periodic(n_fft)
    basis = []   # [2 * bins, 1, n_fft]: windowed cosine rows, then windowed sine rows
    for trig in (math.cos, math.sin):
        for k in range(bins):
            basis.extend(window[t] * trig(2 * math.pi * k * t / n_fft) for t in range(n_fft))
    g = Graph("log_mel")
    g.input("waveform", "float32", [1, "n"])
    g.const("axis1", [1], "int64", [1])
    g.const("basis", basis, "float32", [2 * bins, 1, n_fft])
    g.const("filters", [v for row in mel_filters(sample_rate, n_fft, n_mels) for v in row], "float32",
            [n_mels, bins])
    for name, values in (("zero", [0]), ("bins", [bins]), ("two_bins", [2 * bins]), ("last", [-1]),
                         ("axis2", [2]), ("frames", [frames])):
        g.const(name, values, "int64", [1])
    g.const("tiny", [1e-10], "float32", [])
    g.const("inv_ln10", [1 / math.log(10)], "float32", [])
    g.const("eight", [8.0], "float32", [])
    g.const("minus_ten", [-10.0], "float32", [1])
    g.const("four", [4.0], "float32", [])
    g.const("quarter", [0.25], "float32", [])
    half = n_fft // 2
    x = g.node("Unsqueeze", ["waveform", "axis1"], "x3")
    spec = g.node("Conv", [x, "basis"], "spectrum", pads=[half, half], strides=[hop])
    spec = g.node("Slice", [spec, "zero", "last", "axis2"], "spectrum_cut")   # n // hop frames
    spec = g.node("Slice", [spec, "zero", "frames", "axis2"], "spectrum_kept")
    re = g.node("Slice", [spec, "zero", "bins", "axis1"], "re")
    im = g.node("Slice", [spec, "bins", "two_bins", "axis1"], "im")
    power = g.node("Add", [g.node("Mul", [re, re], "re2"), g.node("Mul", [im, im], "im2")], "power")
    mel = g.node("MatMul", ["filters", power], "mel")
    log = g.node("Mul", [g.node("Log", [g.node("Max", [mel, "tiny"], "clamped")], "ln"), "inv_ln10"], "log10")
    # the floor: the largest value - 8 (with -10, log10 of the clamp, so no audio frame still has one)
    flat = g.node("Concat", [g.node("Reshape", [log, "last"], "flat"), "minus_ten"], "flat_all", axis=0)
    floor = g.node("Sub", [g.node("ReduceMax", [flat], "peak", keepdims=0), "eight"], "floor")
    count = g.node("Shape", [log], "count", start=2)
    pads = g.node("Concat", ["zero", "zero", "zero", "zero", "zero",
                             g.node("Sub", ["frames", count], "missing")], "pads", axis=0)
    floored = g.node("Pad", [g.node("Max", [log, floor], "floored"), pads, floor], "padded")
    g.node("Mul", [g.node("Add", [floored, "four"], "shifted"), "quarter"], "features")
    g.output("features", "float32", [1, n_mels, frames])
    return g.to_bytes()
