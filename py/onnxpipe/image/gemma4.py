"""Gemma 4's image rules (ort-extensions' Gemma4ImageTransform, onnxruntime-genai's
gemma4_multimodal_processor), read as transformers' Gemma4ImageProcessor keys.

1. size: the aspect ratio kept, scaled to fit ``max_soft_tokens * k * k`` patches (k the
   pooling_kernel_size), each side rounded down to a multiple of ``k * patch_size``; a side
   that rounds to 0 becomes one multiple and the other ``floor(long / short)`` multiples (at
   most ``max_soft_tokens / k^2`` of them); both 0 is refused;
2. pixels: a bicubic (a = -0.5), antialiased resize in float (no rounding to 8 bits, no
   clamping), times 1/255, cut into patch_size x patch_size patches row by row, each patch's
   pixels in (row, column, channel) order: pixel_values [1, patches, patch_size^2 * 3];
3. pixel_position_ids [1, patches, 2]: (column, row) of each patch;
4. soft tokens: patches / k^2 per image; in the prompt each "<|image>" (or, when the prompt has
   none, each "<|image|>" if there is one per image; when it has neither, one "<|image>" per
   image before the text, joined by spaces) becomes "\\n\\n<|image>", that many "<|image|>"
   and "<image|>\\n\\n".

The padded patches ort-extensions adds (up to max_soft_tokens * k^2) are left out, as
onnxruntime-genai trims them before the vision session.
"""

from __future__ import annotations

import math
from typing import Any

from ..config.parse import describe
from ..errors import ConfigError, InputError

TYPE = "Gemma4ImageProcessor"
BOI, IMAGE, EOI = "<|image>", "<|image|>", "<image|>"
POOLING = 3   # the only pooling_kernel_size checked against onnxruntime-genai (tests/fixtures/genai_gemma4.py)
_ATTRS = {"patch_size": 16, "max_soft_tokens": 280, "pooling_kernel_size": 3}   # ort-extensions' defaults


def processor_keys(steps: dict[str, tuple[dict[str, Any], str]], file: str) -> dict[str, Any]:
    """Gemma 4's transform list (DecodeImage, Gemma4ImageTransform and nothing else) as
    transformers' Gemma4ImageProcessor keys."""
    others = [k for k in steps if k not in ("DecodeImage", "Gemma4ImageTransform")]
    if others:
        raise ConfigError(f'transform "{others[0]}" with Gemma4ImageTransform: the Gemma 4 transform makes '
                          "the pixels itself; onnxpipe runs DecodeImage, Gemma4ImageTransform", file=file,
                          path=steps[others[0]][1][:-len(".attrs")] + ".type")
    if "DecodeImage" not in steps:
        raise ConfigError("no DecodeImage transform before Gemma4ImageTransform", file=file,
                          path="$.processor.transforms")
    attrs, at = steps["DecodeImage"]
    if attrs.get("color_space", "RGB") != "RGB":
        raise ConfigError(f'color_space: only "RGB" is supported, found {describe(attrs["color_space"])}',
                          file=file, path=f"{at}.color_space")
    attrs, at = steps["Gemma4ImageTransform"]
    out: dict[str, Any] = {"image_processor_type": TYPE, "do_convert_rgb": True, "do_resize": True,
                           "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255,
                           "do_normalize": False}
    for key, default in _ATTRS.items():
        value = attrs.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"expected a positive integer, found {describe(value)}", file=file,
                              path=f"{at}.{key}")
        out[key] = value
    if out["pooling_kernel_size"] != POOLING:
        raise ConfigError(f"pooling_kernel_size: only {POOLING} is supported (onnxruntime-genai cuts the "
                          f"padded patches by {POOLING} x {POOLING} per soft token); found "
                          f"{out['pooling_kernel_size']}", file=file, path=f"{at}.pooling_kernel_size")
    return out


def target_size(height: int, width: int, patch: int, max_soft: int, pool: int) -> tuple[int, int]:
    """Step 1 of the module docstring: the resized (height, width)."""
    side = pool * patch
    factor = math.sqrt(max_soft * pool * pool * patch * patch / (height * width))
    h = int(math.floor(factor * height / side)) * side
    w = int(math.floor(factor * width / side)) * side
    longest = max_soft * side
    if h == 0 and w == 0:
        raise InputError(f"image of {width}x{height}: the aspect ratio is too extreme for Gemma 4's "
                         f"patches ({side}-pixel multiples within {max_soft} soft tokens)")
    if h == 0:
        h, w = side, min(width // height * side, longest) or side
    elif w == 0:
        h, w = min(height // width * side, longest) or side, side
    return h, w


def soft_tokens(height: int, width: int, config) -> int:
    """Soft tokens of an image of this size (after the resize)."""
    h, w = target_size(height, width, config.patch_size, config.max_soft_tokens, config.pooling_kernel_size)
    return (h // config.patch_size) * (w // config.patch_size) // config.pooling_kernel_size ** 2


def positions(height: int, width: int, patch: int) -> list[int]:
    """Step 3: (column, row) of each patch of a resized image, flat."""
    out: list[int] = []
    for row in range(height // patch):
        for col in range(width // patch):
            out += (col, row)
    return out


def expand_prompt(text: str, counts: list[int]) -> str:
    """Step 4 of the module docstring for images with ``counts`` soft tokens each."""
    if text.count(BOI) == 0:
        if text.count(IMAGE) == len(counts) and counts:
            text = text.replace(IMAGE, BOI)
        elif IMAGE not in text:
            text = " ".join([BOI] * len(counts)) + (" " + text if text else "")
    found = text.count(BOI)
    if found != len(counts) or IMAGE in text:
        raise InputError(f"the prompt has {found} {BOI} and {text.count(IMAGE)} {IMAGE} for {len(counts)} "
                         f"image(s): put one {BOI} (or one {IMAGE}) per image where it goes")
    pieces = text.split(BOI)
    out = pieces[0]
    for count, piece in zip(counts, pieces[1:]):
        out += f"\n\n{BOI}{IMAGE * count}{EOI}\n\n{piece}"
    return out
