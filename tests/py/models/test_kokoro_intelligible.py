"""The real Kokoro-82M voice speaks intelligibly in two of its voices (a male and a female):
the independent recogniser (Whisper base by CTranslate2, tests/fixtures/whisper_asr.py)
transcribes what `speak()` makes with a word error rate of at most 0.2. Negative controls show
the check can fail: another sentence's audio, and the same words played backwards, don't match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import onnxpipe
from tests.fixtures import whisper_asr
from tests.py.models.test_piper_intelligible import MAX_WER, needs_asr, wer, words

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "kokoro-82m"
VOICES = ("jm_kumo", "jf_alpha")
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Your browser turns this text into speech without a server.",
]


@pytest.fixture(scope="module")
def spoken():
    """(voice, sentence) -> (samples float32, sample rate, transcript)."""
    assert (BUNDLE / "kokoro.int8.onnx").exists(), f"{BUNDLE} is not built: run `make models`"
    pipe = onnxpipe.load(BUNDLE)
    out = {}
    for voice in VOICES:
        for text in SENTENCES:
            result = pipe.speak(text, voice=voice)
            audio = np.asarray(result.samples, dtype=np.float32)
            out[voice, text] = audio, result.sample_rate, whisper_asr.transcribe(audio, result.sample_rate)
    return out


@needs_asr
@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize("text", SENTENCES)
def test_recogniser_hears_the_sentence(spoken, voice, text):
    audio, rate, transcript = spoken[voice, text]
    assert rate == 24000
    assert 0.2 < audio.size / rate / len(words(text)) < 0.8, "implausible seconds per word"
    assert wer(text, transcript) <= MAX_WER, f"{voice}: heard {transcript!r} for {text!r}"


@needs_asr
@pytest.mark.parametrize("voice", VOICES)
def test_negative_controls(spoken, voice):
    first, second = SENTENCES
    assert wer(second, spoken[voice, first][2]) > 0.6
    audio, rate, _ = spoken[voice, first]
    backwards = whisper_asr.transcribe(audio[::-1].copy(), rate)
    assert wer(first, backwards) > 0.6, f"reversed audio was heard as {backwards!r}"
