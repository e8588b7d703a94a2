"""WAV encoding is exact 16-bit PCM that other tools read back (here: Python's wave module)."""

from __future__ import annotations

import io
import math
import wave

import pytest

from onnxpipe.audio import decode_wav, encode_wav
from onnxpipe.errors import InputError


def test_header_and_samples_read_back_by_the_wave_module():
    samples = [math.sin(2 * math.pi * 440 * i / 22050) * 0.5 for i in range(2205)]
    blob = encode_wav(samples, 22050)
    with wave.open(io.BytesIO(blob)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (1, 2, 22050, 2205)
        frames = w.readframes(2205)
    assert len(blob) == 44 + 2 * 2205
    assert frames == blob[44:]


def test_rounding_and_clipping():
    blob = encode_wav([0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.5, float("nan")], 8000)
    values = [int.from_bytes(blob[44 + 2 * i:46 + 2 * i], "little", signed=True) for i in range(8)]
    assert values == [0, 32767, -32767, 32767, -32768, 16384, -16384, 0]


def test_round_trip_within_one_step():
    samples = [((i * 37) % 200 - 100) / 101 for i in range(1000)]
    back, rate, channels = decode_wav(encode_wav(samples, 24000))
    assert (rate, channels, len(back)) == (24000, 1, 1000)
    assert max(abs(a - b) for a, b in zip(samples, back)) <= 1 / 32767


def test_stereo_and_bad_arguments():
    with wave.open(io.BytesIO(encode_wav([0.1, -0.1] * 10, 16000, channels=2))) as w:
        assert (w.getnchannels(), w.getnframes()) == (2, 10)
    with pytest.raises(InputError, match="sample_rate must be > 0"):
        encode_wav([0.0], 0)
    with pytest.raises(InputError, match="do not split into 2 channels"):
        encode_wav([0.0] * 3, 8000, channels=2)
    with pytest.raises(InputError, match="not a WAV file"):
        decode_wav(b"hello")
