"""An image output tensor -> 8-bit pixels -> PNG, in pure Python (zlib + struct; no PIL, no numpy).

``pipeline.output.image``: ``value_range`` [low, high] maps to 0..255, clamped, rounded half to
even (diffusers: (x / 2 + 0.5).clamp(0, 1) * 255, rounded, for [-1, 1]); ``layout`` NCHW or
NHWC; channels 1 (grey), 3 (RGB) or 4 (RGBA). One PNG per image of the batch.
"""

from __future__ import annotations

import struct
import zlib

from ..config.registry import register_check
from ..errors import InputError

_COLOUR_TYPE = {1: 0, 3: 2, 4: 6}


def to_pixels(values, shape, value_range=(-1.0, 1.0), layout: str = "NCHW") -> list[tuple[int, int, int, bytes]]:
    """(width, height, channels, row-major interleaved bytes) per image of the batch."""
    if len(shape) != 4:
        raise InputError(f"an image output must have 4 dims ({layout}), found shape {list(shape)}")
    if layout == "NCHW":
        n, c, h, w = shape
    else:
        n, h, w, c = shape
    if c not in _COLOUR_TYPE:
        raise InputError(f"an image needs 1, 3 or 4 channels; shape {list(shape)} ({layout}) has {c}")
    low, high = value_range
    span = high - low
    images = []
    size = c * h * w
    for b in range(n):
        flat = values[b * size:(b + 1) * size]
        levels = [min(255, max(0, round(min(1.0, max(0.0, (v - low) / span)) * 255))) for v in flat]
        if layout == "NCHW":   # planes -> interleaved
            plane = h * w
            levels = [levels[ch * plane + i] for i in range(plane) for ch in range(c)]
        images.append((w, h, c, bytes(levels)))
    return images


def png(width: int, height: int, channels: int, pixels: bytes) -> bytes:
    """A PNG file (8 bits per channel, no filtering) of interleaved ``pixels``."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    stride = width * channels
    raw = b"".join(b"\x00" + pixels[y * stride:(y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOUR_TYPE[channels], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def output_pngs(result, spec) -> list[bytes]:
    """PNG files of a run's ``output`` as ``pipeline.output.image`` says."""
    image = spec.pipeline.output.image if spec.pipeline.output is not None else None
    if image is None:
        raise InputError('this bundle\'s output is not an image: pipeline.output has no "image" section')
    values, shape = result.read("output")
    return [png(*item) for item in to_pixels(values, shape, tuple(image.value_range), image.layout)]


def check_declaration(spec, file: str, bundle_dir: str | None = None) -> None:
    """Load-time check of pipeline.output.image."""
    from ..errors import ConfigError

    out = spec.pipeline.output
    image = out.image if out is not None else None
    if image is None:
        return
    r = image.value_range
    if len(r) != 2 or not r[0] < r[1]:
        raise ConfigError(f"expected [low, high] with low < high, found {list(r)}", file=file,
                          path="$.pipeline.output.image.value_range")
    if out.audio is not None or out.segments is not None:
        raise ConfigError('an output is an image, a waveform or speech segments: one of "image", "audio", '
                          '"segments"', file=file, path="$.pipeline.output.image")


register_check("image_output", check_declaration, order=40)
