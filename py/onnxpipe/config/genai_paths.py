"""Errors about a translated genai bundle, told in the user's file.

genai_v1.translate turns genai_config.json into a v2 document; checks that run later (validation,
state discovery, session wiring) report JSON paths of that document ($.pipeline.state.kv_cache...),
which the user never wrote. ``remap`` rewrites such an error to the genai_config.json key it came
from, keeping onnxpipe's own path in the message. A translator of another section adds its rows to
``RULES`` (v2 path prefix -> genai path, or a function of the genai document).
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import ConfigError

_V2_ROOTS = ("$.pipeline", "$.generation", "$.tokens", "$.preprocessing", "$.metadata", "$.version")
_DECODER = "$.model.decoder"


def _kv_names(genai: dict[str, Any]) -> str:
    """A KV error without a narrower key: the past names onnxruntime-genai feeds for this type."""
    from .genai_layout import COMBINED_TYPES

    combined = (genai.get("model") or {}).get("type") in COMBINED_TYPES
    return f"{_DECODER}.inputs.{'past_names' if combined else 'past_key_names'}"


def _max_length(genai: dict[str, Any]) -> str:
    return "$.search.max_length" if "max_length" in (genai.get("search") or {}) else "$.model.context_length"


def _stage_paths(genai: dict[str, Any]) -> dict[str, str]:
    """decoder-pipeline stage name -> its JSON path (the stage names are the session names)."""
    stages = ((genai.get("model") or {}).get("decoder") or {}).get("pipeline")
    groups = ([("", stages)] if isinstance(stages, dict) else
              [(f"[{i}]", g) for i, g in enumerate(stages)] if isinstance(stages, list) else [])
    return {name: f"{_DECODER}.pipeline{index}.{name}"
            for index, group in groups if isinstance(group, dict) for name in group}


def _stage_source(path: str, genai: dict[str, Any]) -> str | None:
    """$.pipeline.sessions.<stage>[.file|.session_options...] -> the stage's own key."""
    for name, where in _stage_paths(genai).items():
        prefix = f"$.pipeline.sessions.{name}"
        if _under(path, prefix):
            rest = path[len(prefix):]
            return where + (".filename" if rest == ".file" else
                            rest if rest.startswith(".session_options") else "")
    return None


def _recurrent_source(path: str, genai: dict[str, Any]) -> str | None:
    """$.pipeline.state.recurrent[i].<key> -> the hybrid decoder's genai key it came from."""
    import re

    from .genai_hybrid import state_keys

    found = re.match(r"\$\.pipeline\.state\.recurrent\[(\d+)\](?:\.(\w+))?", path)
    decoder = (genai.get("model") or {}).get("decoder")
    if not found or not isinstance(decoder, dict):
        return None
    keys = state_keys(decoder)
    index, key = int(found.group(1)), found.group(2) or ""
    if index >= len(keys):
        return None
    return keys[index].get(key, keys[index][""])


# v2 path prefix -> (genai path or a function of the genai document, keep what follows the prefix)
RULES: dict[str, tuple[str | Callable[[dict], str], bool]] = {
    "$.pipeline.sessions.vision.file": ("$.model.vision.filename", False),
    "$.pipeline.sessions.vision": ("$.model.vision", False),
    "$.pipeline.sessions.embedding.file": ("$.model.embedding.filename", False),
    "$.pipeline.sessions.embedding": ("$.model.embedding", False),
    "$.pipeline.sessions.encoder.file": ("$.model.encoder.filename", False),
    "$.pipeline.sessions.encoder": ("$.model.encoder", False),
    "$.preprocessing.image": ("$.model.vision.config_filename", False),
    "$.preprocessing.audio": ("$.model.speech.config_filename", False),
    "$.pipeline.sessions.decoder.file": (f"{_DECODER}.filename", False),
    "$.pipeline.sessions.decoder.execution_provider": (f"{_DECODER}.session_options.provider_options", False),
    "$.pipeline.sessions.decoder.session_options": (f"{_DECODER}.session_options", True),
    "$.pipeline.sessions.decoder": (_DECODER, False),
    "$.pipeline.state.kv_cache.past_key_pattern": (f"{_DECODER}.inputs.past_key_names", False),
    "$.pipeline.state.kv_cache.past_value_pattern": (f"{_DECODER}.inputs.past_value_names", False),
    "$.pipeline.state.kv_cache.present_key_pattern": (f"{_DECODER}.outputs.present_key_names", False),
    "$.pipeline.state.kv_cache.present_value_pattern": (f"{_DECODER}.outputs.present_value_names", False),
    "$.pipeline.state.kv_cache.past_pattern": (f"{_DECODER}.inputs.past_names", False),
    "$.pipeline.state.kv_cache.present_pattern": (f"{_DECODER}.outputs.present_names", False),
    "$.pipeline.state.kv_cache.num_heads": (f"{_DECODER}.num_key_value_heads", False),
    "$.pipeline.state.kv_cache.head_size": (f"{_DECODER}.head_size", False),
    "$.pipeline.state.kv_cache.sliding_window": (f"{_DECODER}.sliding_window", True),
    "$.pipeline.state.kv_cache.format": ("$.search.past_present_share_buffer", False),
    "$.pipeline.state.kv_cache": (_kv_names, False),
    "$.pipeline.state.position_ids": (f"{_DECODER}.inputs.position_ids", False),
    "$.pipeline.state.attention_mask": (f"{_DECODER}.inputs.attention_mask", False),
    "$.pipeline.state": (f"{_DECODER}.inputs", False),
    "$.pipeline": (_DECODER, False),
    "$.generation.sampling": ("$.search", True),
    "$.generation.max_length": (_max_length, False),
    "$.generation.min_length": ("$.search.min_length", False),
    "$.generation": ("$.search", False),
    "$.tokens.eos": ("$.model.eos_token_id", False),
    "$.tokens.bos": ("$.model.bos_token_id", False),
    "$.tokens.pad": ("$.model.pad_token_id", False),
    "$.tokens.decoder_start": ("$.model.decoder_start_token_id", False),
    "$.tokens": ("$.model", False),
    "$.metadata": ("$.model", False),
}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def source_path(path: str, genai: dict[str, Any]) -> str | None:
    """The genai_config.json path a translated document's ``path`` came from (None: not one)."""
    if not any(_under(path, root) for root in _V2_ROOTS):
        return None
    special = _stage_source(path, genai) or _recurrent_source(path, genai)
    if special is not None:
        return special
    for prefix in sorted((p for p in RULES if _under(path, p)), key=len, reverse=True):
        target, keep = RULES[prefix]
        where = target(genai) if callable(target) else target
        return where + path[len(prefix):] if keep else where
    return "$"


def remap(exc: ConfigError, genai: dict[str, Any], file: str) -> ConfigError:
    """``exc`` with its path in genai_config.json (onnxpipe's translated path kept in the
    message), or ``exc`` itself when it already names the user's file or another file."""
    if exc.file not in (None, file) or exc.path is None:
        return exc
    where = source_path(exc.path, genai)
    if where is None:
        return exc
    return ConfigError(f"{exc.detail} (onnxpipe's translation of this key: {exc.path})", file=file, path=where)
