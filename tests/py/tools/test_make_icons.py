"""tools/make_icons.py: the committed manifest icons are what the generator draws, at their sizes."""
from __future__ import annotations

import struct
import zlib

from tools import make_icons


def test_committed_icons_match_the_generator(capsys):
    assert make_icons.main(["--check"]) == 0, capsys.readouterr().err


def test_png_is_well_formed_rgba():
    rows = make_icons.draw(16, maskable=True)
    data = make_icons.png(16, rows)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert (kind, length, width, height, depth, colour) == (b"IHDR", 13, 16, 16, 8, 6)
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]
    # maskable: opaque everywhere (the platform cuts its own shape)
    assert all(rows[y * 65 + 1 + x * 4 + 3] == 255 for y in range(16) for x in range(16))


def test_any_icon_has_transparent_corners_and_a_white_mark():
    size = 64
    rows = make_icons.draw(size, maskable=False)
    pixel = lambda x, y: rows[y * (size * 4 + 1) + 1 + x * 4: y * (size * 4 + 1) + 5 + x * 4]
    assert pixel(0, 0)[3] == 0  # rounded corner
    assert tuple(pixel(size // 2, size // 2)) == (255, 255, 255, 255)  # centre node
    assert tuple(pixel(size // 2, size // 8)) == (*make_icons.ACCENT, 255)  # background
