"""export/kokoro_variant.py on Kokoro's int8 file (public/models/kokoro-82m, `make models`):

- the int8 recipe (the bundle's kokoro.wasm.onnx) has no ConvInteger left and, with onnxruntime's
  graph optimizations off, makes exactly the int8 file's samples (the same integer sums) where
  onnxruntime sums uint8 x int8 exactly (not on AVX2 CPUs without VNNI: u8s8_sums_are_exact);
  with them on (how it runs) it is as close to the int8 file as rounding allows, and intelligible;
- the float recipes (weights dequantized, computed in fp32; stored fp32, or fp16 behind a Cast)
  keep no integer op, sound like the int8 file and are intelligible.

Audio distance (waveforms can't be compared sample by sample: a rounding that moves one
phoneme's duration by a frame, or a phase in the sine source, shifts everything after it): the
mean absolute difference of log-power spectrograms in dB (1024-point Hann frames, hop 256,
floor -60 dB) with frames aligned by dynamic time warping within +-40 frames. Measured on the
sentence below: fp16-stored vs fp32 1.5 dB, int8 file vs fp32 3.2 dB, int8 recipe (optimized)
vs int8 file 2.0 dB, white noise vs fp32 38 dB (quiet bins dominate: float rounding moves them
most). Bounds: fp16 within 2.5 dB of fp32 and closer to it than the int8 file is; the int8 file
within 5 dB of fp32; the int8 recipe within 2.5 dB of the int8 file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from onnxpipe.export.kokoro_variant import make_variant
from tests.fixtures import whisper_asr
from tests.onnxruntime_facts import u8s8_sums_are_exact
from tests.py.models.test_piper_intelligible import MAX_WER, needs_asr, wer

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "kokoro-82m"
TEXT = "The quick brown fox jumps over the lazy dog near the river bank"
INTEGER_OPS = {"MatMulInteger", "ConvInteger", "DynamicQuantizeLSTM", "DynamicQuantizeLinear"}
RECIPES = ("fp32", "fp16", "int8")
# the int8 recipe vs the int8 file: 2.0 dB (optimized) where onnxruntime sums uint8 x int8
# exactly; 2.9 dB on an AVX2 CPU without VNNI, whose saturating sums (u8s8_sums_are_exact) the
# recipe's MatMulInteger meets and the file's ConvInteger does not: there, no further from the file
# than the file is from fp32 (3.2 dB), and intelligible (test_variants_are_intelligible)
RECIPE_VS_FILE_DB = {"exact sums": 2.5, "saturating sums": 3.2}


def log_power(audio, n: int = 1024, hop: int = 256):
    frames = np.lib.stride_tricks.sliding_window_view(np.pad(audio, (0, n)), n)[::hop]
    power = np.abs(np.fft.rfft(frames * np.hanning(n), axis=1)) ** 2
    return 10 * np.log10(np.maximum(power, 1e-6))


def spectral_distance(a, b, band: int = 40) -> float:
    """Mean |dB| difference along the best frame alignment (DTW within +-band frames)."""
    x, y = log_power(a), log_power(b)
    n, m = len(x), len(y)
    total = np.full((n + 1, m + 1), np.inf)
    steps = np.zeros((n + 1, m + 1), np.int64)
    total[0, 0] = 0
    for i in range(1, n + 1):
        lo, hi = max(1, i - band), min(m, i + band)
        cost = np.abs(x[i - 1] - y[lo - 1:hi]).mean(axis=1)
        for j in range(lo, hi + 1):
            prev = min((total[i - 1, j - 1], steps[i - 1, j - 1]), (total[i - 1, j], steps[i - 1, j]),
                       (total[i, j - 1], steps[i, j - 1]))
            total[i, j], steps[i, j] = prev[0] + cost[j - lo], prev[1] + 1
    return float(total[n, m] / steps[n, m])


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    """name -> waveform of TEXT (voice jm_kumo) from the int8 file ("file") and each recipe;
    "<name> plain": the same with graph optimizations off; "<recipe> ops": its op types."""
    import onnxruntime as ort

    source = BUNDLE / "kokoro.int8.onnx"
    assert source.exists(), f"{BUNDLE} is not built: run `make models`"
    folder = tmp_path_factory.mktemp("kokoro-variants")
    files = {"file": source}
    for weights in RECIPES:
        files[weights] = folder / f"kokoro.{weights}.onnx"
        make_variant(str(source), str(files[weights]), weights)
    vocab = json.loads((BUNDLE / "vocab.json").read_text(encoding="utf-8"))["vocab"]
    ipa = subprocess.run(["espeak-ng", f"--path={BUNDLE / '.native'}", "-q", "--ipa", "-v", "en-us", TEXT],
                         capture_output=True, text=True, check=True).stdout.strip()
    ids = [vocab[c] for c in ipa if c in vocab]
    from onnxpipe.export.kokoro import sources

    with np.load(sources()["voices"]) as npz:
        style = npz["jm_kumo"][len(ids) - 1].reshape(1, 256).astype(np.float32)
    feeds = {"tokens": np.array([[0, *ids, 0]], np.int64), "style": style, "speed": np.array([1.0], np.float32)}
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    out = {}
    for name, path in files.items():
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        out[name] = session.run(None, feeds)[0].reshape(-1)
        if name in ("file", "int8"):
            session = ort.InferenceSession(str(path), plain, providers=["CPUExecutionProvider"])
            out[name + " plain"] = session.run(None, feeds)[0].reshape(-1)
        if name != "file":
            import onnx

            out[name + " ops"] = {n.op_type for n in onnx.load(str(path)).graph.node}
    return out


def test_float_recipes_keep_no_integer_op(audio):
    for weights in ("fp32", "fp16"):
        ops = audio[weights + " ops"]
        assert not ops & INTEGER_OPS, ops & INTEGER_OPS
        assert {"MatMul", "Conv", "LSTM"} <= ops
    assert "Cast" in audio["fp16 ops"]


def test_int8_recipe_makes_exactly_the_int8_files_samples(audio):
    ops = audio["int8 ops"]
    assert "ConvInteger" not in ops and {"MatMulInteger", "DynamicQuantizeLSTM"} <= ops
    if u8s8_sums_are_exact():   # the same integer sums, so the same samples
        np.testing.assert_array_equal(audio["int8 plain"], audio["file plain"])
    else:   # saturated sums are another computation: as close as the optimized run must be
        plain = spectral_distance(audio["int8 plain"], audio["file plain"])
        assert plain <= RECIPE_VS_FILE_DB["saturating sums"], plain


def test_variants_sound_like_the_int8_file(audio):
    fp16_vs_fp32 = spectral_distance(audio["fp16"], audio["fp32"])
    file_vs_fp32 = spectral_distance(audio["file"], audio["fp32"])
    recipe_vs_file = spectral_distance(audio["int8"], audio["file"])
    assert fp16_vs_fp32 <= 2.5 and fp16_vs_fp32 < file_vs_fp32, (fp16_vs_fp32, file_vs_fp32)
    assert file_vs_fp32 <= 5.0, file_vs_fp32
    bound = RECIPE_VS_FILE_DB["exact sums" if u8s8_sums_are_exact() else "saturating sums"]
    assert recipe_vs_file <= bound, recipe_vs_file
    for name in RECIPES:
        assert abs(audio[name].size / audio["file"].size - 1) < 0.03, name
    noise = np.random.default_rng(0).normal(0, audio["fp32"].std(), audio["fp32"].size)
    assert spectral_distance(noise, audio["fp32"]) > 20      # the measure can tell speech from noise


@needs_asr
@pytest.mark.parametrize("recipe", ["int8", "fp16"])
def test_variants_are_intelligible(audio, recipe):
    heard = whisper_asr.transcribe(audio[recipe].astype(np.float32), 24000)
    assert wer(TEXT, heard) <= MAX_WER, heard
