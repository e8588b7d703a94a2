"""transformers.js Qwen3.5 folders (model_type ``qwen3_5`` / ``qwen3_5_text``) translated to v2.

    onnx/embed_tokens{suffix}.onnx          input_ids -> inputs_embeds
    onnx/decoder_model_merged{suffix}.onnx  inputs_embeds, attention_mask, position_ids [3, b, s],
        past_conv.N / past_recurrent.N (linear_attention layers), past_key_values.N.key/value
        (full_attention layers) -> logits, present_conv.N, present_recurrent.N, present.N.*

These are the sessions transformers.js's text-generation pipeline loads for Qwen3.5 (its
``text_only_sessions``); a ``vision_encoder`` beside them is not run. The embedding runs every
step and feeds the decoder's ``inputs_embeds``; positions are the 3-D mRoPE ids, the same text
position on every axis; the conv and recurrent state come from config.json's layer_types.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError


def _int(doc: dict, key: str, file: str, path: str, required: bool = True) -> int | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"expected a positive integer, found {value!r}", file=file, path=path)
    return value


def translate(folder: str, config: dict, gen: dict, chosen: dict, dtype: str | None, external_data,
              metadata: dict, token_ids, recurrent: list | None) -> dict[str, Any]:
    """The v2 document; ``chosen`` maps provider (or "default") to (vision or None, embedding,
    decoder) files; ``recurrent``: the state.recurrent entries from layer_types."""
    cfile = os.path.join(folder, "config.json")
    sessions: dict[str, Any] = {}
    for i, name in ((1, "embedding"), (2, "decoder")):
        by_ep = {ep: files[i] for ep, files in chosen.items()}
        session: dict[str, Any] = {"file": by_ep["default"] if dtype else by_ep}
        data = {ep: external_data(f) for ep, f in by_ep.items()}
        if any(data.values()):
            session["external_data"] = data["default"] if dtype else data
        sessions[name] = session
    # transformers 5 nests the text dims of model_type qwen3_5 under text_config
    nested = isinstance(config.get("text_config"), dict)
    text, where = (config["text_config"], "$.text_config") if nested else (config, "$")

    def dim(key: str, required: bool = True) -> int | None:
        return _int(text, key, cfile, f"{where}.{key}", required)

    heads = dim("num_attention_heads")
    kv_heads = dim("num_key_value_heads", False) or heads
    head_size = dim("head_dim", False) or dim("hidden_size") // heads
    kv: dict[str, Any] = {"format": "separate", "num_heads": kv_heads, "head_size": head_size}
    state: dict[str, Any] = {"position_ids": {"strategy": "mrope_3d"}, "kv_cache": kv}
    if recurrent:
        state["recurrent"] = recurrent
    tokens: dict[str, Any] = {"eos": token_ids("eos_token_id")}
    for key in ("bos", "pad"):
        ids = token_ids(f"{key}_token_id")
        if ids:
            tokens[key] = ids[0]
    context = dim("max_position_embeddings", False) or 2048
    limit = _int(gen, "max_length", os.path.join(folder, "generation_config.json"), "$.max_length", False)
    generation: dict[str, Any] = {"loop": "autoregressive", "max_length": min(x for x in (limit, context) if x)}
    sampling = {k: gen[k] for k in ("do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty")
                if gen.get(k) is not None}
    if sampling:
        generation["sampling"] = sampling
    if isinstance(gen.get("min_length"), int):
        generation["min_length"] = gen["min_length"]
    preprocessing: dict[str, Any] = {}
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        preprocessing["text"] = {"tokenizer": "tokenizer.json"}
        for key, name in (("config", "tokenizer_config.json"), ("chat_template", "chat_template.jinja")):
            if os.path.isfile(os.path.join(folder, name)):
                preprocessing["text"][key] = name
    if isinstance(gen.get("max_new_tokens"), int):
        metadata = {**metadata, "max_new_tokens": gen["max_new_tokens"]}   # a caller's default
    return {
        "version": 2,
        "pipeline": {
            "sessions": sessions,
            "flow": [{"run": "embedding", "when": "step"}, {"run": "decoder", "when": "step"}],
            "state": state,
        },
        "tokens": tokens,
        "generation": generation,
        "preprocessing": preprocessing,
        "metadata": {**metadata, "layout": "text-only (embed_tokens + decoder_model_merged)"},
    }
