"""Qwen2-VL's target size for an image, and the order Pillow resamples its two axes in."""

from __future__ import annotations

import math

from ..errors import InputError


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """(height, width) rounded to multiples of ``factor``, the pixel count brought within
    [min_pixels, max_pixels], the aspect ratio kept as well as that allows (transformers' rule)."""
    if max(height, width) / min(height, width) > 200:
        raise InputError(f"image of {width}x{height}: the aspect ratio must be under 200, found "
                         f"{max(height, width) / min(height, width):.1f}")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def vertical_first(height: int, width: int, new_height: int, new_width: int) -> bool:
    """Whether Pillow 13 resamples rows before columns for this resize.

    Measured on random images (Pillow 13.0): when the height shrinks and the width grows or
    stays, the vertical pass comes first; when the height grows, the horizontal one. When both
    shrink Pillow's choice follows a rule not reproduced here; horizontal first is then its more
    frequent pick, and the other order differs by a few 8-bit levels at some pixels.
    """
    return new_height < height and new_width >= width
