"""Draw the app icons of the web manifest (public/icons/*.png) in pure Python.

    python tools/make_icons.py [--out public/icons] [--check]

The mark: three white nodes joined by a pipe on the accent colour of the pages
(web/src/styles.css --accent). Each shape is drawn from its signed distance, so edges are
anti-aliased without supersampling. The PNGs are committed (a few kB); this script is the
source they are made from, and `--check` says whether the committed files still match it.

- icon-192.png, icon-512.png (purpose "any"): a rounded square, transparent corners.
- icon-maskable-512.png (purpose "maskable"): the background fills the whole square (the
  platform cuts its own shape) and the mark stays inside the safe zone, the centred circle
  of radius 40% of the size that every mask keeps.
"""
from __future__ import annotations

import argparse
import math
import struct
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACCENT = (0x2F, 0x5F, 0xD0)  # --accent in web/src/styles.css; also the manifest's theme_color
WHITE = (0xFF, 0xFF, 0xFF)
SAFE_ZONE = 0.4  # radius of the maskable safe circle, as a fraction of the size

# The mark in unit coordinates (0..1, centre 0.5): nodes (x, radius) on y = 0.5 and the pipe.
NODES = ((0.25, 0.1), (0.5, 0.12), (0.75, 0.1))
PIPE_HALF_WIDTH = 0.035
MARK_RADIUS = max(abs(cx - 0.5) + r for cx, r in NODES)  # farthest point of the mark from the centre


def mark_distance(x: float, y: float, scale: float) -> float:
    """Signed distance (unit coordinates) to the mark shrunk by `scale` about the centre."""
    ux, uy = 0.5 + (x - 0.5) / scale, 0.5 + (y - 0.5) / scale
    d = abs(uy - 0.5) - PIPE_HALF_WIDTH if NODES[0][0] <= ux <= NODES[-1][0] else math.inf
    for cx, r in NODES:
        d = min(d, math.hypot(ux - cx, uy - 0.5) - r)
    return d * scale


def rounded_square_distance(x: float, y: float, radius: float) -> float:
    """Signed distance to the unit square with corners rounded by `radius`."""
    qx, qy = abs(x - 0.5) - (0.5 - radius), abs(y - 0.5) - (0.5 - radius)
    outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
    return outside + min(max(qx, qy), 0.0) - radius


def coverage(distance: float, size: int) -> float:
    """Fraction of a pixel inside a shape whose edge is `distance` (unit coordinates) away."""
    return min(1.0, max(0.0, 0.5 - distance * size))


def draw(size: int, maskable: bool) -> bytes:
    """RGBA rows (one filter byte each) of one icon."""
    scale = 0.9 * SAFE_ZONE / MARK_RADIUS if maskable else 1.0  # maskable: 10% inside the safe circle
    rows = bytearray()
    for py in range(size):
        rows.append(0)  # filter: none
        y = (py + 0.5) / size
        for px in range(size):
            x = (px + 0.5) / size
            bg = 1.0 if maskable else coverage(rounded_square_distance(x, y, 0.2), size)
            fg = coverage(mark_distance(x, y, scale), size)
            if bg == 0.0:
                rows += b"\0\0\0\0"
                continue
            rgb = (round(a + (w - a) * fg) for a, w in zip(ACCENT, WHITE))
            rows += bytes((*rgb, round(255 * bg)))
    return bytes(rows)


def png(size: int, rows: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


ICONS = {"icon-192.png": (192, False), "icon-512.png": (512, False), "icon-maskable-512.png": (512, True)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "public" / "icons")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out; write nothing")
    args = ap.parse_args(argv)
    stale = []
    for name, (size, maskable) in ICONS.items():
        data = png(size, draw(size, maskable))
        path = args.out / name
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(str(path))
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {size}x{size}, {len(data)} bytes")
    if stale:
        print(f"stale or missing (run python tools/make_icons.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
