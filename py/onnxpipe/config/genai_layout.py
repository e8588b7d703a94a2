"""genai_config.json's KV layout choices beside the plain decoder: the combined past of the
"gpt2" type, and the ``engine`` section (paged KV cache, batching).

onnxruntime-genai picks its cache class by model type: "gpt2" builds a CombinedKeyValueCache,
one ``past_%d`` / ``present_%d`` tensor per layer of shape [2, batch, kv heads, seq, head] named by
``model.decoder.inputs.past_names`` / ``outputs.present_names`` (no default: both are required);
every other type feeds ``past_key_names`` / ``past_value_names`` and ignores ``past_names``.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .parse import describe

COMBINED_TYPES = ("gpt2",)   # the model types onnxruntime-genai gives a combined cache
_ENGINE_KEYS = ("dynamic_batching", "static_batching")
_STATIC_KEYS = ("max_batch_size",)


def combined_kv(model: dict[str, Any], inputs: dict[str, Any], outputs: dict[str, Any],
                file: str) -> dict[str, Any] | None:
    """state.kv_cache for a combined-past type (past_pattern / present_pattern), else None."""
    if model.get("type") not in COMBINED_TYPES:
        return None
    patterns = {}
    for key, section, names, default in (("past_pattern", "inputs", inputs, "past_%d"),
                                         ("present_pattern", "outputs", outputs, "present_%d")):
        name = key.replace("_pattern", "_names")
        path = f"$.model.decoder.{section}.{name}"
        value = names.get(name)
        if value is None:
            raise ConfigError(f'missing "{name}": onnxruntime-genai feeds a "{model["type"]}" model a '
                              f"combined past per layer (key and value stacked, [2, batch, heads, seq, "
                              f'head]) named by it, e.g. "{default}"', file=file, path=path)
        if not isinstance(value, str) or "%d" not in value:
            raise ConfigError(f'expected a tensor name pattern (a string with "%d" for the layer, e.g. '
                              f'"{default}"), found {describe(value)}', file=file, path=path)
        patterns[key] = value.replace("%d", "{layer}")
    return {"format": "combined", **patterns}


def check_engine(genai: dict[str, Any], file: str) -> None:
    """Refuse ``engine.dynamic_batching`` (a paged KV cache: the model's caches are
    [num_blocks, block_size, kv heads, head] blocks shared by all sequences through a block table,
    run by the PagedAttention op of onnxruntime-genai's continuous-batching engine); check
    ``engine.static_batching``, which only sizes that engine's batches: the model is an ordinary
    decoder and onnxpipe's server batches rows its own way (``onnxpipe serve``)."""
    engine = genai.get("engine")
    if engine is None:
        return
    if not isinstance(engine, dict):
        raise ConfigError(f"expected an object, found {describe(engine)}", file=file, path="$.engine")
    for key, value in engine.items():
        path = f"$.engine.{key}"
        if key not in _ENGINE_KEYS:
            raise ConfigError(f'unknown key "{key}"; onnxruntime-genai\'s engine section has '
                              f'{", ".join(_ENGINE_KEYS)}', file=file, path=path)
        if not isinstance(value, dict):
            raise ConfigError(f"expected an object, found {describe(value)}", file=file, path=path)
        if key == "dynamic_batching":
            block = value.get("block_size", 256)
            raise ConfigError(
                f"a paged KV cache (onnxruntime-genai's continuous-batching engine: KV blocks of "
                f"block_size={block} token slots shared by all sequences through a block table, "
                f"attention by the PagedAttention op, input_ids flattened, no attention_mask) is not "
                f"supported; export the model without use_paged_attention for onnxpipe", file=file,
                path=f"{path}.block_size" if "block_size" in value else path)
        for name, item in value.items():
            if name not in _STATIC_KEYS:
                raise ConfigError(f'unknown key "{name}"; valid keys: {", ".join(_STATIC_KEYS)}',
                                  file=file, path=f"{path}.{name}")
            if not isinstance(item, int) or isinstance(item, bool) or item <= 0:
                raise ConfigError(f"expected a positive integer, found {describe(item)}", file=file,
                                  path=f"{path}.{name}")
