"""The Whisper base bundle (public/models/whisper-base, from `make models`) transcribes natively.

Oracles, computed here at test time: transformers' WhisperForConditionalGeneration.generate
(greedy, the bundle's prefix and suppression lists) on a model the builder's loader makes from
the same CTranslate2 weights, fed transformers' WhisperFeatureExtractor features; the text of
sentences the Piper voice speaks. The mel graph is compared with WhisperFeatureExtractor."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.state.kv_cache import KVCache

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "whisper-base"
PIPER = ROOT / "public" / "models" / "piper-en-us-joe"
BUILT = all((BUNDLE / n).exists() for n in ("mel.onnx", "encoder.onnx", "decoder.onnx", "tokenizer.json"))
MEL_TOLERANCE = 1e-4   # max |mel.onnx - WhisperFeatureExtractor| (float32 STFT vs numpy float64)
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Your browser turns this text into speech without a server.",
    "It is cold outside. Could you close the window before we leave?",
]
LONG = [   # joined with pauses into more than 45 s of speech
    "The quick brown fox jumps over the lazy dog.",
    "Your browser turns this text into speech without a server.",
    "It is cold outside. Could you close the window before we leave?",
    "We walked along the river until the sun went down.",
    "Please bring me a glass of water and a piece of bread.",
    "The library opens early in the morning.",
    "My sister plays the piano every evening after dinner.",
    "The train was late, so we waited on the platform for an hour.",
    "He painted the fence green and planted roses by the gate.",
    "Children were laughing in the park near the old church.",
    "The doctor said that I should sleep more and walk every day.",
    "Our neighbors bought a small boat last summer.",
    "Turn left at the bakery and you will see the station.",
]

pytestmark = pytest.mark.skipif(not BUILT, reason=f"{BUNDLE} is not built: run `make models`")
needs_piper = pytest.mark.skipif(not (PIPER / "en_US-joe-medium.onnx").exists(),
                                 reason=f"{PIPER} is not built: run `make models`")


def words(text: str) -> list[str]:
    """Lowercase words without punctuation ("Isn't it?" -> ["isnt", "it"])."""
    return re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("'", "").replace("\u2019", "")).split()


@pytest.fixture(scope="module")
def whisper():
    return onnxpipe.load(BUNDLE)


@pytest.fixture(scope="module")
def voice():
    return onnxpipe.load(PIPER)


@pytest.fixture(scope="module")
def spoken(voice):
    """sentence -> (samples float32 at 22050 Hz), deterministic (noise scales 0)."""
    out = {}
    for text in dict.fromkeys(SENTENCES + LONG):
        result = voice.speak(text, noise_scale=0, noise_w=0)
        out[text] = np.asarray(result.samples, dtype=np.float32)
    return out, voice.spec.pipeline.output.audio.sample_rate


@pytest.fixture(scope="module")
def reference():
    """(transformers model from the builder's loader, WhisperFeatureExtractor)."""
    from transformers import WhisperFeatureExtractor

    from onnxpipe.export.whisper import load_torch_model

    model, _ = load_torch_model()
    return model, WhisperFeatureExtractor(feature_size=model.config.num_mel_bins, sampling_rate=16000)


def test_loads_as_a_transcription_bundle(whisper):
    assert whisper.kind == "transcription"
    assert whisper.structure == "encoder-decoder"
    names = sorted(type(c).__name__ for c in whisper.executor.components)
    assert names == ["CrossCache", "SeparateKVCache"]
    kv = next(c for c in whisper.executor.components if isinstance(c, KVCache))
    assert all(s.past.name.startswith("past_key_values.") for s in kv.slots)   # no cross input taken


@needs_piper
@pytest.mark.parametrize("text", SENTENCES[:2])
def test_tokens_equal_transformers_generate(whisper, spoken, reference, text):
    import torch

    audio, rate = spoken
    samples16, _, _ = whisper.transcription.resample(audio[text].tolist(), rate)   # the bundle's resampler
    samples16 = np.asarray(samples16, dtype=np.float32)
    ours = whisper.transcribe(samples16, 16000)
    model, features = reference
    feats = features(samples16, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad():
        theirs = model.generate(feats, language="en", task="transcribe", return_timestamps=False)
    expected = [t for t in theirs[0].tolist() if t != model.config.eos_token_id]
    assert ours.tokens == expected
    assert words(ours.text) == words(text)


@needs_piper
@pytest.mark.parametrize("text", SENTENCES)
def test_piper_sentences_are_transcribed_exactly(whisper, spoken, text):
    audio, rate = spoken
    result = whisper.transcribe(audio[text], rate)   # 22050 Hz in: resampled by the graph
    assert words(result.text) == words(text), result.text
    assert result.audio_seconds == pytest.approx(audio[text].size / rate)
    assert set(result.to_dict()) == {"text", "tokens", "audio_seconds", "compute_seconds"}
    assert len(result.windows) == 1


@needs_piper
def test_45_seconds_are_transcribed_window_by_window(whisper, spoken):
    audio, rate = spoken
    pause = np.zeros(int(1.0 * rate), np.float32)
    parts = []
    for text in LONG:
        parts += [audio[text], pause]
    joined = np.concatenate(parts)
    assert joined.size / rate > 45
    seen = []
    result = whisper.transcribe(joined, rate, on_text=seen.append)
    assert len(result.windows) == 2 and seen == result.windows
    assert words(result.text) == [w for text in LONG for w in words(text)], result.text
    first, second = result.windows
    assert first.end_seconds == second.start_seconds and 20 < first.end_seconds <= 30
    cut = int(first.end_seconds * rate)   # the cut fell in a pause
    assert np.max(np.abs(joined[cut - rate // 20:cut + rate // 20])) < 1e-3


@needs_piper
def test_cancel_stops_after_the_current_window(whisper, spoken):
    audio, rate = spoken
    joined = np.concatenate([audio[t] for t in LONG] * 2)
    result = whisper.transcribe(joined, rate, cancel=lambda: True)
    assert result.finish_reason == "cancelled" and len(result.windows) == 1


@pytest.mark.parametrize("kind", ["speech", "noise", "30 s", "longer than 30 s", "500 samples", "silence"])
def test_mel_graph_matches_the_feature_extractor(kind):
    from transformers import WhisperFeatureExtractor

    rng = np.random.default_rng(0)
    t = np.arange(16000 * 3) / 16000
    speechy = (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)
               + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    x = {"speech": speechy, "noise": (0.05 * rng.standard_normal(16000 * 7)).astype(np.float32),
         "30 s": np.tile(speechy, 10), "longer than 30 s": np.tile(speechy, 12),
         "500 samples": speechy[:500], "silence": np.zeros(16000, np.float32)}[kind]
    ref = WhisperFeatureExtractor(feature_size=80, sampling_rate=16000)(
        x, sampling_rate=16000, return_tensors="np").input_features
    got = ort.InferenceSession(str(BUNDLE / "mel.onnx")).run(None, {"waveform": x[None],
                                                                     "input_frames": np.array([3000], np.int64)})[0]
    assert got.shape == ref.shape == (1, 80, 3000)
    assert np.max(np.abs(got - ref)) <= MEL_TOLERANCE


def _whole_window_mel(tmp_path: Path) -> Path:
    """The bundle with mel.onnx's input_frames fixed at 3000 (the whole window, as before it took
    input_frames): the encoder cuts the window's features to the frames it encodes."""
    import json
    import os

    import onnx
    from onnx import TensorProto, helper

    out = tmp_path / "whole-window-mel"
    out.mkdir()
    for f in BUNDLE.iterdir():
        if f.name not in ("pipeline.json", "mel.onnx", "manifest.json", ".built"):
            os.symlink(f, out / f.name)
    mel = onnx.load(str(BUNDLE / "mel.onnx"))
    mel.graph.input.remove(next(i for i in mel.graph.input if i.name == "input_frames"))
    mel.graph.initializer.append(helper.make_tensor("input_frames", TensorProto.INT64, [1], [3000]))
    onnx.save(mel, str(out / "mel.onnx"))
    doc = json.loads((BUNDLE / "pipeline.json").read_text(encoding="utf-8"))
    doc["pipeline"]["dataflow"].remove({"from": "inputs.input_frames", "to": "mel.input_frames"})
    (out / "pipeline.json").write_text(json.dumps(doc), encoding="utf-8")
    return out


@needs_piper
def test_mel_computes_only_the_encoded_frames(whisper, spoken, tmp_path):
    """mel.onnx at input_frames N is its whole window cut to N (CUT_TOLERANCE: the same samples
    through the same ops; see the builder), and a transcript's tokens are those of the whole
    window's features cut by the encoder."""
    from onnxpipe.export.whisper import CUT_TOLERANCE
    from onnxpipe.pipeline import audio_context

    audio, rate = spoken
    samples16, _, _ = whisper.transcription.resample(audio[SENTENCES[0]].tolist(), rate)
    wave = np.asarray(samples16, dtype=np.float32)[None]
    frames = audio_context.frames(whisper.spec.preprocessing.audio, wave.shape[1])   # what the pipeline asks
    mel = ort.InferenceSession(str(BUNDLE / "mel.onnx"), providers=["CPUExecutionProvider"])
    whole = mel.run(None, {"waveform": wave, "input_frames": np.array([3000], np.int64)})[0]
    for n in (2, 100, wave.shape[1] // 160, frames):   # fewer frames than the audio too
        cut = mel.run(None, {"waveform": wave, "input_frames": np.array([n], np.int64)})[0]
        assert cut.shape == (1, 80, n)
        assert np.max(np.abs(cut - whole[:, :, :n])) <= CUT_TOLERANCE, n
    before = onnxpipe.load(_whole_window_mel(tmp_path))
    ours, theirs = whisper.transcribe(wave[0], 16000), before.transcribe(wave[0], 16000)
    assert ours.tokens == theirs.tokens, (ours.text, theirs.text)


def test_bad_audio_is_refused_clearly(whisper):
    with pytest.raises(InputError, match="empty"):
        whisper.transcribe([], 16000)
    with pytest.raises(InputError, match="sample_rate"):
        whisper.transcribe([0.0] * 100, 0)
    with pytest.raises(InputError, match="sequence of numbers"):
        whisper.transcribe("hello", 16000)
    with pytest.raises(InputError, match="less than one sample"):
        whisper.transcribe([0.1], 44100)


def test_cli_json_and_a_corrupt_wav(tmp_path, capsys):
    from onnxpipe.audio import encode_wav
    from onnxpipe.cli import main

    t = np.arange(8000) / 8000
    wav = tmp_path / "tone.wav"
    wav.write_bytes(encode_wav((0.1 * np.sin(2 * np.pi * 440 * t)).tolist(), 8000))
    assert main(["transcribe", str(BUNDLE), "--audio", str(wav), "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "tokens", "audio_seconds", "compute_seconds"}
    assert out["audio_seconds"] == pytest.approx(1.0)
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt ")
    assert main(["transcribe", str(BUNDLE), "--audio", str(bad)]) != 0
    err = capsys.readouterr().err
    assert str(bad) in err and "WAV" in err
