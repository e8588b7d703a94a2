"""onnxruntime-genai's Mistral 3 bundles (model.type "mistral3", Pixtral images): what differs
from Gemma 3's.

onnxruntime-genai 0.18 runs them as Gemma 3's (genai_multimodal.py: vision once per image, the
embedding merging image_features at the image token, a decoder fed inputs_embeds with ordinary
positions), except:
- the processor file is ort-extensions' Pixtral list (smart_resize, ConvertRGB, Permute3D,
  PixtralImageSizes; image/pixtral.py): pixel_values [1, 3, h, w] at the image's own size;
- the prompt: each run of [IMG] becomes one [IMG] per merged patch, each row of them ended by
  [IMG_BREAK], the last by [IMG_END] (ids from tokenizer.json, as genai's processor finds them;
  [INST] places images the prompt has no [IMG] for), so tokens.extra gets image_break,
  image_end and image_inst beside image_token;
- vision.patch_size * vision.spatial_merge_size (genai_config.json) count the tokens per image
  while the processor file's patch_size * merge_size size it: they must be equal here (genai
  would refuse or miscount a bundle where they differ).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from .parse import describe
from .registry import PROCESSOR_READERS

TYPE = "mistral3"
VISION_KEYS = ("filename", "config_filename", "patch_size", "spatial_merge_size", "session_options",
               "inputs", "outputs")
VISION_INPUTS = ("pixel_values",)
MARKS = {"image_token": "[IMG]", "image_break": "[IMG_BREAK]", "image_end": "[IMG_END]",
         "image_inst": "[INST]"}
_DEFAULTS = {"patch_size": 14, "spatial_merge_size": 2}   # onnxruntime-genai's config.h


def _tokenizer_ids(file: str) -> dict[str, int]:
    from .load import read_json

    path = os.path.join(os.path.dirname(file), "tokenizer.json")
    doc = read_json(path) if os.path.isfile(path) else {}
    found: dict[str, int] = {}
    for entry in doc.get("added_tokens", []) if isinstance(doc, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int):
            found.setdefault(entry.get("content"), entry["id"])
    return found


def image_token(model: dict[str, Any], file: str) -> int:
    """[IMG]'s id: tokenizer.json's, which genai's processor expands; model.image_token_id (the
    builder writes it) must name the same id."""
    ids = _tokenizer_ids(file)
    if MARKS["image_token"] not in ids:
        raise ConfigError(f'model.type "{TYPE}": images take the [IMG] id from tokenizer.json\'s '
                          "added_tokens (as onnxruntime-genai's mistral3 processor), found no [IMG] there",
                          file=file, path="$.model.type")
    token = ids[MARKS["image_token"]]
    if "image_token_id" in model and model["image_token_id"] != token:
        raise ConfigError(f"expected the [IMG] id of tokenizer.json ({token}), found "
                          f"{describe(model['image_token_id'])}", file=file, path="$.model.image_token_id")
    return token


def extend(model: dict[str, Any], doc: dict[str, Any], file: str) -> None:
    """The row markers in tokens.extra; the token-count factor checked against the processor's."""
    ids = _tokenizer_ids(file)
    extra = doc["tokens"].setdefault("extra", {})
    for key in ("image_break", "image_end", "image_inst"):
        if MARKS[key] in ids:
            extra[key] = ids[MARKS[key]]
        elif key != "image_inst":   # without [INST] genai puts images without [IMG] first
            raise ConfigError(f'model.type "{TYPE}": images end each row of [IMG] with {MARKS[key]}, found '
                              "no such token in tokenizer.json's added_tokens", file=file, path="$.model.type")
    vision = model["vision"]
    sizes = {}
    for key, default in _DEFAULTS.items():
        value = vision.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"expected a positive integer, found {describe(value)}", file=file,
                              path=f"$.model.vision.{key}")
        sizes[key] = value
    ref = vision.get("config_filename", "processor_config.json")
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"expected the processor file's name (a non-empty string), found {describe(ref)}",
                          file=file, path="$.model.vision.config_filename")
    try:
        processor, path = PROCESSOR_READERS["image"](os.path.dirname(file), ref, "$.model.vision.config_filename")
    except ConfigError as exc:
        if exc.file is None:   # the reference itself is wrong: name genai_config.json
            raise ConfigError(exc.message.split(": ", 1)[-1], file=file,
                              path="$.model.vision.config_filename") from None
        raise
    if not processor.pixtral:
        raise ConfigError(f'model.type "{TYPE}" reads the Pixtral transform list (ending in Permute3D, '
                          f"PixtralImageSizes), found {processor.image_processor_type} rules in {ref}",
                          file=file, path="$.model.vision.config_filename")
    factor = sizes["patch_size"] * sizes["spatial_merge_size"]
    if factor != processor.factor:
        raise ConfigError(f"patch_size * spatial_merge_size = {factor} counts the [IMG] tokens, but {ref} "
                          f"resizes to multiples of {processor.factor} (its patch_size * merge_size): "
                          "expected them equal", file=file, path="$.model.vision.patch_size")
