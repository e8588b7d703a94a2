"""A Whisper bundle as onnxruntime-genai's builder writes it, loaded unchanged: onnxpipe's greedy
tokens equal onnxruntime-genai's (and transformers') on the same audio (tests/agreement.py)."""

import json
import wave

import numpy as np

import onnxpipe


def _samples(bundle):
    with wave.open(str(bundle / "audio.wav")) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    return (pcm.astype(np.float32) / 32768).tolist(), rate


def test_greedy_tokens_equal_onnxruntime_genai(genai_whisper):
    expected = json.loads((genai_whisper / "expected.json").read_text())
    pipe = onnxpipe.load(genai_whisper)
    samples, rate = _samples(genai_whisper)
    result = pipe.transcribe(samples, rate, max_new_tokens=expected["max_new_tokens"])
    assert result.tokens == expected["greedy_tokens"]
    assert list(pipe.loaded.spec.tokens.decoder_prefix) == expected["decoder_prefix"]
