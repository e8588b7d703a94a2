"""Mistral 3 / Pixtral images as onnxruntime-genai 0.18's mistral3_image_processor makes them.

- the size: ort-extensions' Resize with smart_resize (its own rounding, which differs from
  transformers' smart_resize: halves round away from zero, the min_pixels branch truncates
  before rounding up, and a side is never under patch_size * merge_size);
- the pixels: [1, 3, h, w], channels first (ops/image.py's nchw_graph); ort-extensions'
  ConvertRGB swaps the channels of the RGB decode, so a list with it hands the vision session
  B, G, R (normalised with the mean and std as written, in order);
- the prompt: the ids are tokenized first; each run of [IMG] is then replaced by the next
  image's tokens: per row of merged patches one [IMG] per column, then [IMG_BREAK], the last
  row ending in [IMG_END]; images left over go after the first [INST] (before everything
  when there is none). The k-th [IMG] of the prompt takes the k-th row of image features.
"""

from __future__ import annotations

import math
from typing import Any

from ..config.parse import describe
from ..errors import ConfigError, InputError

MAX_RATIO = 200   # ort-extensions' max_ratio_
MEAN, STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]   # its defaults
STEPS = ("DecodeImage", "ConvertRGB", "Resize", "Rescale", "Normalize", "Permute3D", "PixtralImageSizes")


def processor_keys(steps: dict[str, tuple[dict[str, Any], str]], resize_defaults: dict[str, Any],
                   file: str) -> dict[str, Any]:
    """The Pixtral transform list (steps by type: (attrs, their JSON path)) as
    Mistral3ImageProcessor keys (image/config.py); ``resize_defaults`` are ort-extensions'."""
    def fail(message: str, path: str) -> None:
        raise ConfigError(message, file=file, path=path)

    for kind in steps:
        if kind not in STEPS:
            fail(f'transform "{kind}" is not part of the Pixtral list (PixtralImageSizes): onnxpipe runs '
                 f'{", ".join(STEPS)} there', steps[kind][1][:-len(".attrs")] + ".type")
    for kind in ("DecodeImage", "Resize", "Permute3D"):
        if kind not in steps:
            fail(f"no {kind} transform: the Pixtral list (PixtralImageSizes) runs "
                 f"{', '.join(STEPS)}; onnxpipe needs DecodeImage, Resize and Permute3D of them",
                 "$.processor.transforms")
    attrs, path = steps["DecodeImage"]
    if attrs.get("color_space", "RGB") != "RGB":
        fail(f'color_space: only "RGB" is supported, found {describe(attrs["color_space"])}',
             f"{path}.color_space")
    attrs, path = steps["Permute3D"]
    if attrs.get("dims") != [2, 0, 1]:
        fail(f"dims: only [2, 0, 1] (channels first) is supported, found {describe(attrs.get('dims'))}",
             f"{path}.dims")
    attrs, path = steps["Resize"]
    resize = dict(resize_defaults, **attrs)
    if resize["smart_resize"] != 1:
        fail("smart_resize: only 1 is supported in the Pixtral list (sides snapped to patch_size * "
             f"merge_size within min_pixels..max_pixels); found {describe(resize['smart_resize'])}"
             f"{'' if 'smart_resize' in attrs else ' (the default when absent)'}", f"{path}.smart_resize")
    if resize["interpolation"] != "CUBIC":
        fail(f'interpolation: only "CUBIC" is supported, found {describe(resize["interpolation"])}',
             f"{path}.interpolation")
    out: dict[str, Any] = {"image_processor_type": "Mistral3ImageProcessor", "do_convert_rgb": True,
                           "do_resize": True, "resample": 3, "min_pixels": resize["min_pixels"],
                           "max_pixels": resize["max_pixels"], "patch_size": resize["patch_size"],
                           "merge_size": resize["merge_size"], "do_rescale": "Rescale" in steps,
                           "do_normalize": "Normalize" in steps, "bgr": "ConvertRGB" in steps}
    if "Rescale" in steps:
        out["rescale_factor"] = steps["Rescale"][0].get("rescale_factor", 1 / 255)
    if "Normalize" in steps:
        attrs, path = steps["Normalize"]
        for key in ("qwen2_5_vl", "qwen3_vl"):
            if attrs.get(key):
                fail(f"{key}: the Qwen-VL channel swap, not part of the Pixtral list", f"{path}.{key}")
        out.update(image_mean=attrs.get("mean", MEAN), image_std=attrs.get("std", STD))
    return out


def target_size(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """(height, width) after ort-extensions' smart_resize (image_transforms.hpp)."""
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise InputError(f"image of {width}x{height}: the aspect ratio must be under {MAX_RATIO}, found "
                         f"{max(height, width) / min(height, width):.1f}")
    h_bar = max(factor, _round_half_away(height / factor) * factor)
    w_bar = max(factor, _round_half_away(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = int(height / beta) // factor * factor
        w_bar = int(width / beta) // factor * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(int(height * beta) / factor) * factor
        w_bar = math.ceil(int(width * beta) / factor) * factor
    if h_bar <= 0 or w_bar <= 0:
        raise InputError(f"image of {width}x{height}: max_pixels {max_pixels} leaves no row or column of "
                         f"{factor}-pixel patches")
    return h_bar, w_bar


def _round_half_away(x: float) -> int:
    """C's std::round for a positive x."""
    return int(math.floor(x + 0.5))


def image_tokens(height: int, width: int, factor: int, img: int, brk: int, end: int) -> list[int]:
    """The ids one image of (height, width) pixels stands for in the prompt."""
    rows, cols = height // factor, width // factor
    out: list[int] = []
    for r in range(rows):
        out.extend([img] * cols)
        out.append(brk if r < rows - 1 else end)
    return out


def expand(ids: list[int], sequences: list[list[int]], img: int, brk: int, end: int,
           inst: int | None) -> list[int]:
    """``ids`` with the images' ``sequences`` put in as onnxruntime-genai does (module
    docstring). Ids that already hold exactly those sequences, in order, are kept."""
    if brk in ids or end in ids:   # expanded already: check it
        _check_expanded(ids, sequences, img, brk, end)
        return list(ids)
    out: list[int] = []
    images = iter(sequences)
    used = 0
    i = 0
    while i < len(ids):
        if ids[i] == img:
            if used == len(sequences):   # genai would leave it, with no features for it
                raise InputError(f"the prompt has more runs of the image token (id {img}) than the "
                                 f"{len(sequences)} image(s) given: put one [IMG] per image where it goes")
            out.extend(next(images))
            used += 1
            while i + 1 < len(ids) and ids[i + 1] == img:
                i += 1
        else:
            out.append(ids[i])
        i += 1
    rest = [t for seq in images for t in seq]
    if rest:
        at = out.index(inst) + 1 if inst is not None and inst in out else 0
        out[at:at] = rest
    return out


def _check_expanded(ids: list[int], sequences: list[list[int]], img: int, brk: int, end: int) -> None:
    """Refuse ids whose image ids ([IMG], [IMG_BREAK], [IMG_END]) are not exactly the images'
    sequences, in order, each one contiguous."""
    marks = (img, brk, end)
    groups: list[list[int]] = []
    prev = -2
    for pos, t in enumerate(ids):
        if t in marks:
            if pos != prev + 1 or (groups and groups[-1][-1] == end):
                groups.append([])
            groups[-1].append(t)
            prev = pos
    if groups != sequences:
        raise InputError(f"the prompt holds image ids ([IMG] {img}, [IMG_BREAK] {brk}, [IMG_END] {end}) "
                         f"that are not the {len(sequences)} image(s)' layout: put one [IMG] per image "
                         "where it goes and let the images expand it")
