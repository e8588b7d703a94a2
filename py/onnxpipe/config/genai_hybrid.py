"""Hybrid decoders in onnxruntime-genai bundles: convolution and linear-attention state.

The model builder writes LFM2 (short-convolution layers between attention layers) with
``decoder.layer_types``, ``decoder.conv_cache_size`` and per-layer ``past_conv_names`` /
``present_conv_names``, and Qwen3.5 (Gated DeltaNet layers) with conv names and
``past_recurrent_names`` / ``present_recurrent_names``. Each pair becomes one
``pipeline.state.recurrent`` entry with a ``{layer}`` pattern: one state per layer the graph has
(shape and dtype read from it), the KV cache keeping only the attention layers'. The states
after the last CHECKPOINTS runs are kept, so a chat that cuts back to one of them continues.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .parse import describe

CHECKPOINTS = 4
# genai_config.json input / output keys of a hybrid decoder's state pairs, with onnxruntime-genai's
# defaults for a key left out
_PAIRS = (("past_conv_names", "present_conv_names", "conv",
           "past_key_values.%d.conv_state", "present.%d.conv_state"),
          ("past_recurrent_names", "present_recurrent_names", "recurrent",
           "past_key_values.%d.recurrent_state", "present.%d.recurrent_state"))
# layer_types whose layers carry a convolution window (the builder's names)
_CONV_TYPES = ("conv", "linear_attention")
_ATTENTION_TYPES = ("full_attention", "sliding_attention", "attention")


def _pattern(name: Any, file: str, path: str) -> str:
    if not isinstance(name, str) or "%d" not in name:
        raise ConfigError(f'expected a tensor name pattern (a string with "%d" for the layer), '
                          f"found {describe(name)}", file=file, path=path)
    return name.replace("%d", "{layer}")


def _layer_types(decoder: dict, file: str) -> list[str] | None:
    path = "$.model.decoder.layer_types"
    types = decoder.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise ConfigError(f"expected a list of layer type names, found {describe(types)}", file=file,
                          path=path)
    for i, kind in enumerate(types):
        if kind not in _CONV_TYPES + _ATTENTION_TYPES:
            raise ConfigError(f'layer type "{kind}" is not one onnxpipe runs; known: '
                              f'{", ".join(_CONV_TYPES + _ATTENTION_TYPES)}', file=file,
                              path=f"{path}[{i}]")
    layers = decoder.get("num_hidden_layers")
    if isinstance(layers, int) and not isinstance(layers, bool) and layers != len(types):
        raise ConfigError(f"{len(types)} layer types for num_hidden_layers {layers}", file=file, path=path)
    return types


def _wanted(decoder: dict[str, Any], inputs: dict, outputs: dict) -> dict[str, bool]:
    raw = decoder.get("layer_types")
    kinds = set(raw) if isinstance(raw, list) and all(isinstance(t, str) for t in raw) else set()
    wanted = {
        "conv": decoder.get("conv_cache_size") is not None or bool(kinds & set(_CONV_TYPES)),
        "recurrent": "linear_attention" in kinds,
    }
    for past_key, present_key, kind, _, _ in _PAIRS:
        wanted[kind] = wanted[kind] or past_key in inputs or present_key in outputs
    return wanted


def state_keys(decoder: dict[str, Any]) -> list[dict[str, str]]:
    """Per pipeline.state.recurrent entry recurrent_state makes, in order, the genai_config.json
    path each of its keys came from (genai_paths tells errors about the entry there)."""
    inputs, outputs = decoder.get("inputs") or {}, decoder.get("outputs") or {}
    if not isinstance(inputs, dict) or not isinstance(outputs, dict):
        return []
    wanted = _wanted(decoder, inputs, outputs)
    base = "$.model.decoder"
    return [{"input": f"{base}.inputs.{past_key}", "output": f"{base}.outputs.{present_key}",
             "layers": f"{base}.layer_types",
             "shape": f"{base}.conv_cache_size" if kind == "conv" else f"{base}.inputs.{past_key}",
             "": f"{base}.inputs.{past_key}"}
            for past_key, present_key, kind, _, _ in _PAIRS if wanted[kind]]


def recurrent_state(decoder: dict[str, Any], inputs: dict, outputs: dict, file: str) -> list[dict]:
    """The decoder's conv / recurrent state pairs as pipeline.state.recurrent entries ([] for a
    decoder without them). A pair is there when one of its names is given, or (with
    onnxruntime-genai's default names) when conv_cache_size / layer_types say so: a conv state
    for conv_cache_size or a conv / linear_attention layer, a recurrent state for a
    linear_attention layer. layer_types is read only then: other decoders (Gemma's sliding /
    full attention) keep what genai_v1 makes of them."""
    wanted = _wanted(decoder, inputs, outputs)
    if not any(wanted.values()):
        return []
    types = _layer_types(decoder, file)
    size = decoder.get("conv_cache_size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        raise ConfigError(f"expected a positive integer (the convolution window), found {describe(size)}",
                          file=file, path="$.model.decoder.conv_cache_size")
    entries = []
    for past_key, present_key, kind, past_default, present_default in _PAIRS:
        if not wanted[kind]:
            continue
        entry: dict[str, Any] = {
            "input": _pattern(inputs.get(past_key, past_default), file, f"$.model.decoder.inputs.{past_key}"),
            "output": _pattern(outputs.get(present_key, present_default), file,
                               f"$.model.decoder.outputs.{present_key}"),
            "checkpoints": CHECKPOINTS,
        }
        if types is not None:
            kept = _CONV_TYPES if kind == "conv" else ("linear_attention",)
            entry["layers"] = [i for i, t in enumerate(types) if t in kept]
        if kind == "conv" and _conv_shape(decoder):
            entry["shape"] = _conv_shape(decoder)   # conv_cache_size checked against the graph
        entries.append(entry)
    return entries


def _conv_shape(decoder: dict[str, Any]) -> list[int] | None:
    """[1, hidden_size, conv_cache_size] where both are given (LFM2: checked against the graph)."""
    hidden, size = decoder.get("hidden_size"), decoder.get("conv_cache_size")
    if isinstance(hidden, int) and not isinstance(hidden, bool) and hidden > 0 and isinstance(size, int):
        return [1, hidden, size]
    return None
