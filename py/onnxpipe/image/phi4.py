"""Phi-4-multimodal's dynamic HD layout, as ort-extensions computes it (Phi4VisionDynamicPreprocess
and Phi4VisionProcessor, the steps onnxruntime-genai's phi4mm bundles name): the crop grid, the
resized size and white padding, the per-crop attention mask and the image token count. Plain
Python with ort-extensions' float32 arithmetic; the pixels themselves are ops/image.py's hd_graph.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

SIDE = 448         # dyhd_base_resolution: the crop side
MASK = SIDE // 14  # mask cells per crop side (one per 14 x 14 patch)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@dataclass(frozen=True)
class Layout:
    rows: int      # crops down (target_aspect_ratio[1])
    cols: int      # crops across (target_aspect_ratio[0])
    height: int    # resized height, before padding
    width: int     # resized width
    pad_h: int     # white rows added at the bottom
    pad_w: int     # white columns added at the right


def _closest_ratio(aspect: float, max_crops: int, width: int, height: int) -> tuple[int, int]:
    """(cols, rows): find_closest_aspect_ratio over the grids of 1..max_crops crops, fewest first
    (ties of equal difference go to the later grid when the image covers half its area)."""
    ratios = sorted({(i, j) for n in range(1, max_crops + 1) for i in range(1, n + 1)
                     for j in range(1, n + 1) if i * j <= max_crops}, key=lambda r: r[0] * r[1])
    best_diff, best = math.inf, (1, 1)
    for i, j in ratios:
        diff = _f32(abs(aspect - _f32(i / j)))
        if diff < best_diff:
            best_diff, best = diff, (i, j)
        elif diff == best_diff and width * height > 0.5 * SIDE * SIDE * i * j:
            best = (i, j)
    return best


def layout(height: int, width: int, max_crops: int) -> Layout:
    """dynamic_preprocess: a grid of at most ``max_crops`` crops of SIDE x SIDE, the image
    resized to fill it along one side (the other in proportion, truncated), padded white."""
    cols, rows = math.ceil(width / SIDE), math.ceil(height / SIDE)
    if cols * rows > max_crops:
        cols, rows = _closest_ratio(_f32(_f32(width) / height), max_crops, width, height)
    target_w, target_h = SIDE * cols, SIDE * rows
    ratio_w, ratio_h = _f32(target_w / width), _f32(target_h / height)
    if ratio_w < ratio_h:
        new_w, new_h = target_w, int(_f32(height * ratio_w))
    else:
        new_w, new_h = int(_f32(width * ratio_h)), target_h
    if min(new_h, target_h) < 10 or min(new_w, target_w) < 10:
        raise ValueError(f"image of {width}x{height}: the aspect ratio is too extreme for "
                         f"Phi-4's crops (resized to {new_w}x{new_h})")
    return Layout(rows, cols, new_h, new_w, target_h - new_h, target_w - new_w)


def crop_masks(lay: Layout) -> list[float]:
    """image_attention_mask [1 + rows * cols, MASK, MASK], flat: the global image's (all ones),
    then each crop's, row by row; cells of the padding (whole 14-pixel steps from the far
    edges) 0, except that a crop whose first cell is padding is all ones (ort-extensions'
    phi4-vision aligner)."""
    full_h, full_w = MASK * lay.rows, MASK * lay.cols
    cut_h = lay.pad_h // 14 if lay.pad_h >= 14 else 0
    cut_w = lay.pad_w // 14 if lay.pad_w >= 14 else 0
    out = [1.0] * (MASK * MASK)
    for r in range(lay.rows):
        for c in range(lay.cols):
            if r * MASK >= full_h - cut_h or c * MASK >= full_w - cut_w:
                out.extend([1.0] * (MASK * MASK))
                continue
            for y in range(r * MASK, (r + 1) * MASK):
                for x in range(c * MASK, (c + 1) * MASK):
                    out.append(0.0 if y >= full_h - cut_h or x >= full_w - cut_w else 1.0)
    return out


def image_tokens(lay: Layout) -> int:
    """num_img_tokens: 256 global cells + 16 newlines + 1 separator, then the kept cells of the
    crops' mask taken every second cell and one newline per kept row."""
    full_h, full_w = MASK * lay.rows, MASK * lay.cols
    cut_h = lay.pad_h // 14 if lay.pad_h >= 14 else 0
    cut_w = lay.pad_w // 14 if lay.pad_w >= 14 else 0
    kept_rows = len(range(0, full_h - cut_h, 2))
    kept_cols = len(range(0, full_w - cut_w, 2))
    return 256 + 1 + 16 + kept_rows * kept_cols + kept_rows
