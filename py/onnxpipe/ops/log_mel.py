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

With ``pad_waveform`` and ``center_pad="reflect"`` it computes them the way transformers'
``WhisperFeatureExtractor`` does for transformers.js / Optimum Whisper folders instead: the
samples cut or zero-padded to ``frames * hop`` first (so frames past the audio are frames of
silence, not the floor), mirrored by n_fft / 2 at both ends, and the last STFT frame dropped.

``speechlib_log_mel_graph(n_fft, frame_length, hop, mel_n_fft, n_mels)``: input ``waveform``
f32[1, n] (n >= frame_length); output ``features`` f32[1, frames, n_mels], Phi-4-multimodal's
audio features as onnxruntime-extensions' ``Phi4AudioEmbed`` computes them (SpeechLib):
(n - frame_length) // hop + 1 frames, no centring; in each frame the samples pre-emphasised
(x[t] - 0.97 x[t - 1], the first sample against itself), scaled by 32768, times a symmetric
Hamming window of frame_length, zero-padded to n_fft; power |X|^2 through SpeechLib's mel
filters (config/windows.py) made for mel_n_fft at 16 kHz (an 8 kHz STFT reads the first
mel_n_fft // 2 - n_fft // 2 - 1 bins, as ort-extensions does); ln of max(mel, 1).

Pure Python setup (no numpy), so the graph is built in Pyodide too.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..config.windows import hamming_speechlib, hann_periodic, mel_filters, speechlib_mel_filters
from .proto import Graph

__all__ = ["hann_periodic", "log_mel_graph", "mel_filters", "speechlib_bins", "speechlib_log_mel_graph"]

PREEMPHASIS = 0.97   # SpeechLib's, in onnxruntime-extensions' SpeechLibSTFTNorm


@lru_cache(maxsize=4)
def log_mel_graph(sample_rate: int, n_fft: int, hop: int, n_mels: int, frames: int,
                  center_pad: str = "zero", pad_waveform: bool = False) -> bytes:
    """The graph described in the module docstring."""
    for name, value in (("sample_rate", sample_rate), ("n_fft", n_fft), ("hop", hop),
                        ("n_mels", n_mels), ("frames", frames)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    if center_pad not in ("zero", "reflect"):
        raise ValueError(f'center_pad: expected "zero" or "reflect", got {center_pad!r}')
    if center_pad == "reflect" and not (pad_waveform and frames * hop > n_fft // 2):
        raise ValueError(f"center_pad reflect: expected pad_waveform with frames * hop ({frames * hop}) > "
                         f"n_fft // 2 ({n_fft // 2}), so there are samples to mirror; got pad_waveform "
                         f"{pad_waveform!r}")
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
    wave, conv_pads = "waveform", [half, half]
    if pad_waveform:   # exactly frames * hop samples: the audio cut, or followed by zeros
        g.const("total", [frames * hop], "int64", [1])
        cut = g.node("Slice", [wave, "zero", "total", "axis1"], "wave_cut")
        missing = g.node("Sub", ["total", g.node("Shape", [cut], "wave_len", start=1)], "wave_missing")
        wave = g.node("Pad", [cut, g.node("Concat", ["zero", "zero", "zero", missing], "wave_pads", axis=0)],
                      "wave_padded")
    if center_pad == "reflect":
        g.const("center", [0, half, 0, half], "int64", [4])
        wave, conv_pads = g.node("Pad", [wave, "center"], "wave_mirrored", mode="reflect"), [0, 0]
    x = g.node("Unsqueeze", [wave, "axis1"], "x3")
    spec = g.node("Conv", [x, "basis"], "spectrum", pads=conv_pads, strides=[hop])
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


def speechlib_bins(n_fft: int, mel_n_fft: int) -> int:
    """How many STFT bins SpeechLib's mel filters read (ort-extensions' SpeechLibLogMel: all
    n_fft // 2 + 1 when the filters have as many columns; else the first mel columns - bins - 1);
    ValueError when the filters have fewer columns than the STFT has bins."""
    bins, columns = n_fft // 2 + 1, mel_n_fft // 2 + 1
    if columns < bins:
        raise ValueError(f"mel n_fft {mel_n_fft} gives {columns} filter columns, fewer than the "
                         f"{bins} bins of the n_fft {n_fft} STFT")
    return bins if columns == bins else columns - bins - 1


@lru_cache(maxsize=4)
def speechlib_log_mel_graph(n_fft: int, frame_length: int, hop: int, mel_n_fft: int, n_mels: int) -> bytes:
    """The SpeechLib graph described in the module docstring."""
    for name, value in (("n_fft", n_fft), ("frame_length", frame_length), ("hop", hop),
                        ("mel_n_fft", mel_n_fft), ("n_mels", n_mels)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    if not 2 <= frame_length <= n_fft:
        raise ValueError(f"frame_length: expected 2 .. n_fft ({n_fft}), got {frame_length}")
    bins, used = n_fft // 2 + 1, speechlib_bins(n_fft, mel_n_fft)
    window = hamming_speechlib(frame_length)
    basis = []   # [2 * bins, 1, frame_length]: pre-emphasis, scale and window folded into the DFT rows
    for trig in (math.cos, math.sin):
        for k in range(bins):
            row = [window[t] * trig(2 * math.pi * k * t / n_fft) for t in range(frame_length)]
            row[0] *= 1.0 - PREEMPHASIS
            basis.extend(32768.0 * (row[j] - PREEMPHASIS * (row[j + 1] if j + 1 < frame_length else 0.0))
                         for j in range(frame_length))
    filters = [r[:used] + [0.0] * (bins - used) for r in speechlib_mel_filters(mel_n_fft, n_mels)]
    g = Graph("speechlib_log_mel")
    g.input("waveform", "float32", [1, "n"])
    g.const("axis1", [1], "int64", [1])
    g.const("basis", basis, "float32", [2 * bins, 1, frame_length])
    g.const("filters", [v for row in filters for v in row], "float32", [n_mels, bins])
    for name, values in (("zero", [0]), ("bins", [bins]), ("two_bins", [2 * bins])):
        g.const(name, values, "int64", [1])
    g.const("one", [1.0], "float32", [])
    x = g.node("Unsqueeze", ["waveform", "axis1"], "x3")
    spec = g.node("Conv", [x, "basis"], "spectrum", strides=[hop])   # [1, 2 * bins, frames]
    re = g.node("Slice", [spec, "zero", "bins", "axis1"], "re")
    im = g.node("Slice", [spec, "bins", "two_bins", "axis1"], "im")
    power = g.node("Add", [g.node("Mul", [re, re], "re2"), g.node("Mul", [im, im], "im2")], "power")
    mel = g.node("MatMul", ["filters", power], "mel")   # [1, n_mels, frames]
    log = g.node("Log", [g.node("Max", [mel, "one"], "clamped")], "ln")
    g.node("Transpose", [log], "features", perm=[0, 2, 1])
    g.output("features", "float32", [1, "frames", n_mels])
    return g.to_bytes()
