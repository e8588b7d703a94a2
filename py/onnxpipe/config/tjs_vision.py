"""transformers.js vision-language folders (Qwen2-VL) translated onto the ``vision-language`` preset
(Qwen3.5's text-only pair: tjs_text.py).

    config.json  generation_config.json  preprocessor_config.json  [tokenizer.json ...]
    onnx/vision_encoder{suffix}.onnx        pixel_values, grid_thw -> image_features
    onnx/embed_tokens{suffix}.onnx          input_ids -> inputs_embeds
    onnx/decoder_model_merged{suffix}.onnx  inputs_embeds, attention_mask, position_ids [3, b, s],
                                            past_key_values.N.key/value -> logits, present.N.*

These are the names transformers.js's Qwen2VLForConditionalGeneration runs: the preset's
vision (one image per run), embedding (image features merged at ``image_token_id``) and decoder
sessions, with 3-D mRoPE position ids (docs/vision-language.md). The image grids reach the
vision encoder's ``grid_thw`` from the preprocessing's ``image_grid_thw``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import BundleError, ConfigError

VISION, EMBED, DECODER = "vision_encoder", "embed_tokens", "decoder_model_merged"
SUPPORTED = ("qwen2_vl",)
# run as transformers.js's text-generation pipeline runs them: embed_tokens + decoder_model_merged
# (its text_only_sessions), with a vision_encoder beside them left unused
TEXT_ONLY = ("qwen3_5", "qwen3_5_text")


def _model_type(folder: str) -> Any:
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return None   # the translation reads config.json again and says what is wrong with it
    return config.get("model_type") if isinstance(config, dict) else None


def text_only(folder: str) -> bool:
    return _model_type(folder) in TEXT_ONLY


def needed(folder: str) -> str:
    """The files a folder of this model_type needs, for errors."""
    if text_only(folder):
        return f"{EMBED}<suffix>.onnx and {DECODER}<suffix>.onnx"
    return f"{VISION}<suffix>.onnx, {EMBED}<suffix>.onnx and {DECODER}<suffix>.onnx"


def files(folder: str, rel_dir: str, suffixes: dict[str, str]) -> dict[str, tuple[str | None, str, str]]:
    """dtype -> (vision, embedding, decoder) files, for the dtypes that have all three (a text-only
    model_type: embedding and decoder, vision None)."""
    names = set(os.listdir(os.path.join(folder, rel_dir) if rel_dir else folder))
    bases = (EMBED, DECODER) if text_only(folder) else (VISION, EMBED, DECODER)
    out = {}
    for dtype, suffix in suffixes.items():
        found = tuple(f"{base}{suffix}.onnx" for base in bases)
        if all(n in names for n in found):
            paths = tuple(f"{rel_dir}/{n}" if rel_dir else n for n in found)
            out[dtype] = paths if len(paths) == 3 else (None, *paths)
    return out


def _int(doc: dict, key: str, file: str, path: str, required: bool = True) -> int | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"expected an integer >= 0, found {value!r}", file=file, path=path)
    return value


def translate(folder: str, config: dict, gen: dict, chosen: dict[str, tuple[str, str, str]], dtype: str | None,
              external_data, metadata: dict, token_ids, recurrent: list | None = None) -> dict[str, Any]:
    """The v2 document of a vision-language folder; ``chosen`` maps provider (or "default") to
    its (vision, embedding, decoder) files; ``token_ids(key)`` reads eos/bos/pad ids;
    ``recurrent``: the hybrid decoder's state.recurrent entries (text-only model_types)."""
    model_type = config.get("model_type")
    cfile = os.path.join(folder, "config.json")
    if model_type in TEXT_ONLY:
        from .tjs_text import translate as translate_text

        return translate_text(folder, config, gen, chosen, dtype, external_data, metadata, token_ids, recurrent)
    if model_type not in SUPPORTED:
        raise BundleError(f'{folder}: a vision-language folder ({VISION}.onnx + {EMBED}.onnx + {DECODER}.onnx) of '
                          f'model_type "{model_type}" ({cfile}); onnxpipe translates such folders for model_type '
                          f'{", ".join(SUPPORTED)} (3-D mRoPE positions) only')
    if not os.path.isfile(os.path.join(folder, "preprocessor_config.json")):
        raise BundleError(f"{folder}: no preprocessor_config.json (the image processor of a vision-language folder)")
    sessions: dict[str, Any] = {}
    for i, name in enumerate(("vision", "embedding", "decoder")):
        by_ep = {ep: triple[i] for ep, triple in chosen.items()}
        session: dict[str, Any] = {"file": by_ep["default"] if dtype else by_ep}
        data = {ep: external_data(f) for ep, f in by_ep.items()}
        if any(data.values()):
            session["external_data"] = data["default"] if dtype else data
        sessions[name] = session
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    where = {k: ("$", config) if k in config else ("$.text_config", text) for k in
             ("num_attention_heads", "num_key_value_heads", "hidden_size", "max_position_embeddings")}

    def dim(key: str, required: bool = True) -> int | None:
        path, doc = where[key]
        return _int(doc, key, cfile, f"{path}.{key}", required)

    heads = dim("num_attention_heads")
    kv_heads = dim("num_key_value_heads", False) or heads
    hidden = dim("hidden_size")
    image_token = _int(config, "image_token_id", cfile, "$.image_token_id")
    vision = config.get("vision_config") if isinstance(config.get("vision_config"), dict) else {}
    merge = _int(vision, "spatial_merge_size", cfile, "$.vision_config.spatial_merge_size", False)
    position_ids: dict[str, Any] = {"strategy": "mrope_3d"}
    if merge is not None:
        position_ids["spatial_merge_size"] = merge
    tokens: dict[str, Any] = {"eos": token_ids("eos_token_id"), "extra": {"image_token": image_token}}
    for key in ("bos", "pad"):
        ids = token_ids(f"{key}_token_id")
        if ids:
            tokens[key] = ids[0]
    context = dim("max_position_embeddings", False) or 2048
    limit = _int(gen, "max_length", os.path.join(folder, "generation_config.json"), "$.max_length", False)
    preprocessing: dict[str, Any] = {"image": {"config": "preprocessor_config.json", "expected_outputs": {
        "pixel_values": {"rank": 2, "dtype": "float32"}, "image_grid_thw": {"rank": 2, "dtype": "int64"}}}}
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        preprocessing["text"] = {"tokenizer": "tokenizer.json"}
        for key, name in (("config", "tokenizer_config.json"), ("chat_template", "chat_template.jinja")):
            if os.path.isfile(os.path.join(folder, name)):
                preprocessing["text"][key] = name
    return {
        "version": 2,
        "pipeline": {
            "extends": "vision-language",
            "sessions": sessions,
            "dataflow": [{"from": "inputs.image_grid_thw", "to": "vision.grid_thw"}],
            "state": {"position_ids": position_ids,
                      "kv_cache": {"format": "separate", "num_heads": kv_heads, "head_size": hidden // heads}},
        },
        "tokens": tokens,
        "generation": {"max_length": min(x for x in (limit, context) if x)},
        "preprocessing": preprocessing,
        "metadata": {**metadata, "layout": "vision-language"},
    }
