"""onnxruntime-genai bundles (genai_config.json, "v1") translated to pipeline.json v2.

This module translates the decoder (``model.decoder``, the search and token settings); each other
section has its own module: genai_layout.py (the combined past, the engine section),
genai_pipeline.py (decoder-pipeline stages), genai_multimodal.py (vision + embedding),
genai_encoder.py (Whisper's encoder and audio processor). The output is a plain v2 document, so
everything after this point treats both kinds of bundle alike.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from . import genai_layout, genai_multimodal, genai_pipeline
from .genai_encoder import add_encoder, check_type
from .genai_hybrid import recurrent_state
from .genai_session import session_settings
from .parse import describe

FILE = "genai_config.json"
# genai search keys we carry over as generation.sampling defaults (same names in v2).
_SAMPLING_KEYS = ("do_sample", "temperature", "top_k", "top_p", "repetition_penalty",
                  "num_beams", "no_repeat_ngram_size", "random_seed", "length_penalty",
                  "early_stopping", "num_return_sequences")
_SLIDING_KEYS = ("window_size", "layers", "cache_slack", "slide_key_value_cache", "slide_inputs",
                 "alignment", "pad_value")


def _pattern(name: Any, file: str, path: str) -> str:
    if not isinstance(name, str):
        raise ConfigError(f'expected a tensor name pattern (a string with "%d" for the layer), '
                          f"found {describe(name)}", file=file, path=path)
    return name.replace("%d", "{layer}")


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _object(value: Any, file: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"expected an object, found {describe(value)}", file=file, path=path)
    return value


def _sliding_window(sliding: Any, file: str) -> dict[str, Any] | None:
    """decoder.sliding_window -> state.kv_cache.sliding_window, or an error for what we can't run.

    onnxruntime-genai reads window_size, layers, cache_slack, slide_key_value_cache and
    slide_inputs (both true when absent), alignment and pad_value (used only when sliding).
    Only the builder's cpu/cuda layout runs here: both slide flags false, window-sized caches
    the GroupQueryAttention op evicts from (state/sliding_window.py). The flags' true case is
    its QNN path (uint8 caches, prompt fed in window-sized chunks).
    """
    path = "$.model.decoder.sliding_window"
    if sliding is None:
        return None
    sliding = _object(sliding, file, path)
    unknown = sorted(set(sliding) - set(_SLIDING_KEYS))
    if unknown:
        raise ConfigError(f'unknown key "{unknown[0]}"; valid keys: {", ".join(_SLIDING_KEYS)}',
                          file=file, path=f"{path}.{unknown[0]}")
    for flag in ("slide_key_value_cache", "slide_inputs"):
        if sliding.get(flag, True) is not False:
            raise ConfigError(f"{flag}: only false is supported (the bounded cache that "
                              "GroupQueryAttention evicts from, as the model builder writes for "
                              f"cpu and cuda); found {describe(sliding.get(flag, True))}"
                              f"{'' if flag in sliding else ' (the default when absent)'}",
                              file=file, path=f"{path}.{flag}")
    size = sliding.get("window_size")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        return None   # onnxruntime-genai keeps ordinary caches when there is no window
    out: dict[str, Any] = {"window_size": size, "layers": sliding.get("layers", [])}
    if "cache_slack" in sliding:
        out["cache_slack"] = sliding["cache_slack"]
    return out


def translate(genai: dict[str, Any], file: str = FILE) -> dict[str, Any]:
    """A v2 pipeline document equivalent to onnxruntime-genai's ``genai_config.json``."""
    genai = _object(genai, file, "$")
    model = genai.get("model")
    if isinstance(model, dict):
        check_type(model, file)
    if not isinstance(model, dict) or not isinstance(model.get("decoder"), dict):
        raise ConfigError('expected a "model.decoder" section (a decoder-only model)', file=file,
                          path="$.model.decoder")
    if "encoder" not in model:   # with an encoder (Whisper), model.speech only names its audio processor file
        genai_multimodal.check(model, file)
    decoder = model["decoder"]
    staged = model.get("type") == genai_pipeline.PIPELINE_TYPE   # stages instead of one file
    if "filename" not in decoder and not staged:
        raise ConfigError('missing "filename"' + (' (a "pipeline" of stages runs only with model.type '
                          f'"{genai_pipeline.PIPELINE_TYPE}", found {describe(model.get("type"))})'
                          if "pipeline" in decoder else ""), file=file, path="$.model.decoder.filename")
    inputs = _object(decoder.get("inputs", {}), file, "$.model.decoder.inputs")
    outputs = _object(decoder.get("outputs", {}), file, "$.model.decoder.outputs")
    search = _object(genai.get("search", {}), file, "$.search")
    genai_layout.check_engine(genai, file)
    session: dict[str, Any] = {"file": decoder.get("filename"), **session_settings(
        decoder.get("session_options", {}), file, "$.model.decoder.session_options")}

    dataflow = []
    if inputs.get("input_ids", "input_ids") != "input_ids":
        dataflow.append({"from": "inputs.input_ids", "to": f"decoder.{inputs['input_ids']}"})
    if outputs.get("logits", "logits") != "logits":
        dataflow.append({"from": f"decoder.{outputs['logits']}", "to": "outputs.logits"})

    share = bool(search.get("past_present_share_buffer", False))
    kv = {
        "format": "shared_buffer" if share else "separate",
        "past_key_pattern": _pattern(inputs.get("past_key_names", "past_key_values.%d.key"), file,
                                     "$.model.decoder.inputs.past_key_names"),
        "past_value_pattern": _pattern(inputs.get("past_value_names", "past_key_values.%d.value"), file,
                                       "$.model.decoder.inputs.past_value_names"),
        "present_key_pattern": _pattern(outputs.get("present_key_names", "present.%d.key"), file,
                                        "$.model.decoder.outputs.present_key_names"),
        "present_value_pattern": _pattern(outputs.get("present_value_names", "present.%d.value"), file,
                                          "$.model.decoder.outputs.present_value_names"),
    }
    kv = genai_layout.combined_kv(model, inputs, outputs, file) or kv
    for key, name in (("num_heads", "num_key_value_heads"), ("head_size", "head_size")):
        value = decoder.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            if value <= 0:
                raise ConfigError(f"expected a positive integer, found {value}", file=file,
                                  path=f"$.model.decoder.{name}")
            kv[key] = value
    state: dict[str, Any] = {
        "kv_cache": kv,
        "position_ids": {"input_name": inputs.get("position_ids", "position_ids")},
        "attention_mask": {"input_name": inputs.get("attention_mask", "attention_mask")},
    }
    recurrent = recurrent_state(decoder, inputs, outputs, file)   # hybrid conv / linear-attention layers
    if recurrent:
        state["recurrent"] = recurrent
    sliding = _sliding_window(decoder.get("sliding_window"), file)
    if sliding:
        kv["sliding_window"] = sliding

    sampling = {k: search[k] for k in _SAMPLING_KEYS if k in search}
    generation = {"loop": "autoregressive", "sampling": sampling,
                  "max_length": search.get("max_length", model.get("context_length", 2048)),
                  "min_length": search.get("min_length", 0)}
    tokens: dict[str, Any] = {"eos": _ids(model.get("eos_token_id"))}
    for key, name in (("bos", "bos_token_id"), ("pad", "pad_token_id"),
                      ("decoder_start", "decoder_start_token_id")):
        value = model.get(name)
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            tokens[key] = value
    doc = {
        "version": 2,
        "pipeline": {
            "sessions": {"decoder": session},
            "flow": [{"run": "decoder", "when": "step"}],
            "dataflow": dataflow,
            "state": state,
        },
        "tokens": tokens,
        "generation": generation,
        "metadata": {"model_type": model.get("type"), "source": "genai_config.json (v1)",
                     "vocab_size": model.get("vocab_size")},
    }
    if "encoder" in model:
        return add_encoder(genai, doc, file)
    if not staged:
        return genai_multimodal.translate(model, doc, file)
    extra = [s for s in genai_multimodal.SECTIONS if s in model]
    if extra:   # the vision-language flow feeds one "decoder" session, not a list of stages
        raise ConfigError(f"a decoder pipeline (model.decoder.pipeline) together with model.{extra[0]} "
                          "is not supported: the vision-language flow feeds one decoder session",
                          file=file, path=f"$.model.{extra[0]}")
    return genai_pipeline.translate(doc, model, file)
