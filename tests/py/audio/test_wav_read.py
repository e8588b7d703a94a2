"""WAV reading (audio/wav.py decode_wav): every supported sample format, and bad files refused
with a message that says what is wrong. Expected values are written out by hand or made with
the standard library's ``wave`` module (an independent writer)."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from onnxpipe.audio import decode_wav, encode_wav
from onnxpipe.errors import InputError


def _riff(fmt: bytes, data: bytes) -> bytes:
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _fmt(kind: int, channels: int, rate: int, bits: int) -> bytes:
    block = channels * bits // 8
    return struct.pack("<HHIIHH", kind, channels, rate, rate * block, block, bits)


def test_16_bit_from_the_standard_library_writer():
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        w.writeframes(struct.pack("<4h", 32767, -32767, 0, 16384))
    samples, rate, channels = decode_wav(buf.getvalue())
    assert (rate, channels) == (44100, 2)
    assert samples == pytest.approx([1.0, -1.0, 0.0, 16384 / 32767])


def test_8_24_32_bit_pcm_and_float():
    cases = {
        "pcm8": (_fmt(1, 1, 8000, 8), bytes([128, 255, 0]), [0.0, 127 / 128, -1.0]),
        "pcm24": (_fmt(1, 1, 16000, 24), b"\x00\x00\x40" + b"\xff\xff\xff" + b"\x00\x00\x80",
                  [0.5, -1 / 2 ** 23, -1.0]),
        "pcm32": (_fmt(1, 1, 16000, 32), struct.pack("<2i", 2 ** 30, -2 ** 31), [0.5, -1.0]),
        "float32": (_fmt(3, 1, 22050, 32), struct.pack("<2f", 0.25, -0.75), [0.25, -0.75]),
        "float64": (_fmt(3, 1, 22050, 64), struct.pack("<2d", 0.125, 1.0), [0.125, 1.0]),
    }
    for name, (fmt, data, want) in cases.items():
        samples, rate, channels = decode_wav(_riff(fmt, data))
        assert samples == pytest.approx(want, abs=1e-9), name
        assert channels == 1


def test_extensible_format_reads_its_sub_format():
    fmt = _fmt(0xFFFE, 1, 48000, 32) + struct.pack("<HHIH", 22, 32, 4, 3) + b"\x00" * 14   # IEEE float GUID head
    samples, rate, _ = decode_wav(_riff(fmt, struct.pack("<f", -0.5)))
    assert (samples, rate) == ([-0.5], 48000)


def test_round_trip_with_the_writer():
    samples, rate, channels = decode_wav(encode_wav([0.0, 0.5, -0.5], 16000))
    assert rate == 16000 and channels == 1 and samples == pytest.approx([0.0, 0.5, -0.5], abs=1e-4)


@pytest.mark.parametrize("blob, message", [
    (b"", "empty"),
    (b"ID3\x03" + b"\x00" * 40, "RIFF/WAVE"),
    (b"RIFF\x04\x00\x00\x00WAVE", "fmt chunk and a data chunk"),
    (_riff(_fmt(1, 1, 16000, 16), b"")[:36], "data chunk"),
    (_riff(_fmt(2, 1, 16000, 4), b"\x00\x00"), "unsupported WAV sample format 2 with 4 bits"),
    (_riff(_fmt(1, 0, 16000, 16), b"\x00\x00"), "0 channel"),
    (b"RIFF\x10\x00\x00\x00WAVEfmt \x04\x00\x00\x00abcd", "fmt chunk is 4 bytes"),
])
def test_bad_files_say_what_is_wrong(blob, message):
    with pytest.raises(InputError, match=message):
        decode_wav(blob)


def test_a_truncated_data_chunk_keeps_the_whole_samples():
    blob = _riff(_fmt(1, 1, 16000, 16), struct.pack("<3h", 100, 200, 300))[:-1]   # cut mid-sample
    samples, _, _ = decode_wav(blob)
    assert samples == pytest.approx([100 / 32767, 200 / 32767])
