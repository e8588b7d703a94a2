"""transformers.js / Optimum encoder-decoder folders (Whisper) translated to pipeline.json v2.

    config.json  generation_config.json  [preprocessor_config.json]  [tokenizer.json ...]
    onnx/encoder_model{suffix}.onnx          input_features -> last_hidden_state
    onnx/decoder_model_merged{suffix}.onnx   input_ids, encoder_hidden_states, use_cache_branch,
                                             past_key_values.N.decoder/encoder.key/value
                                             -> logits, present.N.decoder/encoder.key/value

The encoder runs once per input (init phase, ``inputs.audio_features``); its
``last_hidden_state`` feeds the decoder's ``encoder_hidden_states`` on every step. The decoder's
self-attention cache is an ordinary separate KV cache (``.decoder.`` names); the cross-attention
keys/values (``.encoder.`` names) are ``state.cross_kv``: made by the decoder on its first step,
fed back unchanged after. The decoder prompt is what transformers.js builds for Whisper:
``decoder_start_token_id``, then English and "transcribe" from ``lang_to_id`` / ``task_to_id``
(or ``forced_decoder_ids``), then ``no_timestamps_token_id``. With preprocessor_config.json,
``preprocessing.audio`` computes those features from a waveform as transformers'
WhisperFeatureExtractor does (config/tjs_audio.py), so ``transcribe`` works on the folder.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import BundleError, ConfigError
from .tjs_audio import audio_preprocessing

ENCODER, DECODER = "encoder_model", "decoder_model_merged"
FEATURES = "audio_features"   # the pipeline input: log-mel features, or the waveform via preprocessing.audio
LANGUAGE, TASK = "<|en|>", "transcribe"   # transformers.js's defaults without language / task
SUPPORTED = "whisper"


def files(folder: str, rel_dir: str, suffixes: dict[str, str]) -> dict[str, tuple[str, str]]:
    """dtype -> (encoder file, decoder file), for the dtypes that have both."""
    where = os.path.join(folder, rel_dir) if rel_dir else folder
    names = set(os.listdir(where))
    out = {}
    for dtype, suffix in suffixes.items():
        enc, dec = f"{ENCODER}{suffix}.onnx", f"{DECODER}{suffix}.onnx"
        if enc in names and dec in names:
            out[dtype] = tuple(f"{rel_dir}/{n}" if rel_dir else n for n in (enc, dec))
    return out


def _ids(gen: dict, key: str, file: str) -> list[int]:
    value = gen.get(key)
    if value is None:
        return []
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ConfigError(f"expected token ids (integers >= 0), found {value!r}", file=file, path=f"$.{key}")
    return values


def _id(doc: dict, key: str, file: str, required: bool) -> int | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"expected a token id (an integer >= 0), found {value!r}", file=file, path=f"$.{key}")
    return value


def decoder_prefix(config: dict, gen: dict, folder: str, generation_file: str) -> list[int]:
    """The first decoder ids, as transformers.js's Whisper generate makes them (English
    transcription, no timestamps)."""
    gfile = os.path.join(folder, generation_file)
    start = _id(gen, "decoder_start_token_id", gfile, False)
    if start is None:
        start = _id(config, "decoder_start_token_id", os.path.join(folder, "config.json"), True)
    prefix = [start]
    lang_to_id, task_to_id = gen.get("lang_to_id"), gen.get("task_to_id")
    if isinstance(lang_to_id, dict) and lang_to_id:
        if LANGUAGE not in lang_to_id:
            raise ConfigError(f'no "{LANGUAGE}" (English, the language onnxpipe transcribes) among '
                              f"{len(lang_to_id)} languages", file=gfile, path="$.lang_to_id")
        prefix.append(_id(lang_to_id, LANGUAGE, gfile, True))
        if not isinstance(task_to_id, dict) or TASK not in task_to_id:
            raise ConfigError(f'expected an object with a "{TASK}" id, found {task_to_id!r}', file=gfile,
                              path="$.task_to_id")
        prefix.append(_id(task_to_id, TASK, gfile, True))
    else:   # an older export: forced ids by position, or an English-only model with neither
        forced = gen.get("forced_decoder_ids") or []
        if not isinstance(forced, list):
            raise ConfigError(f"expected a list of [position, id] pairs, found {forced!r}", file=gfile,
                              path="$.forced_decoder_ids")
        for i, pair in enumerate(sorted(forced, key=lambda p: p[0] if isinstance(p, list) and p else 0)):
            if not (isinstance(pair, list) and len(pair) == 2 and pair[0] == len(prefix)
                    and isinstance(pair[1], int)):
                raise ConfigError(f"expected [position, id] pairs for positions 1, 2, ... with ids, found "
                                  f"{pair!r}", file=gfile, path=f"$.forced_decoder_ids[{i}]")
            prefix.append(pair[1])
    no_ts = _id(gen, "no_timestamps_token_id", gfile, False)
    if no_ts is not None and no_ts not in prefix:
        prefix.append(no_ts)
    return prefix


def translate(folder: str, config: dict, gen: dict, chosen: dict[str, tuple[str, str]], dtype: str | None,
              external_data, metadata: dict, generation_file: str) -> dict[str, Any]:
    """The v2 document of an encoder-decoder folder; ``chosen`` maps provider (or "default")
    to its (encoder, decoder) files."""
    model_type = config.get("model_type")
    cfile = os.path.join(folder, "config.json")
    if model_type != SUPPORTED:
        raise BundleError(f'{folder}: an encoder-decoder folder ({ENCODER}.onnx + {DECODER}.onnx) of model_type '
                          f'"{model_type}" ({cfile}); onnxpipe translates such folders for model_type '
                          f'"{SUPPORTED}" (speech to text) only')
    sessions: dict[str, Any] = {}
    for i, name in enumerate(("encoder", "decoder")):
        by_ep = {ep: pair[i] for ep, pair in chosen.items()}
        session: dict[str, Any] = {"file": by_ep["default"] if dtype else by_ep}
        data = {ep: external_data(f) for ep, f in by_ep.items()}
        if any(data.values()):
            session["external_data"] = data["default"] if dtype else data
        sessions[name] = session
    heads = _id(config, "decoder_attention_heads", cfile, True)
    d_model = _id(config, "d_model", cfile, True)
    if not heads or d_model % heads:
        raise ConfigError(f"expected d_model ({d_model}) to be a multiple of decoder_attention_heads ({heads})",
                          file=cfile, path="$.decoder_attention_heads")
    kv = {"format": "separate", "num_heads": heads, "head_size": d_model // heads,
          "past_key_pattern": "past_key_values.{layer}.decoder.key",
          "past_value_pattern": "past_key_values.{layer}.decoder.value",
          "present_key_pattern": "present.{layer}.decoder.key",
          "present_value_pattern": "present.{layer}.decoder.value"}
    gfile = os.path.join(folder, generation_file)
    eos = _ids(gen, "eos_token_id", gfile) or _ids(config, "eos_token_id", cfile)
    tokens: dict[str, Any] = {"eos": eos, "decoder_prefix": decoder_prefix(config, gen, folder, generation_file)}
    positions = _id(config, "max_target_positions", cfile, False)
    limit = _id(gen, "max_length", gfile, False)
    generation: dict[str, Any] = {"loop": "autoregressive",
                                  "max_length": min(x for x in (positions, limit, 448) if x)}
    suppress = {"always": _ids(gen, "suppress_tokens", gfile) or _ids(config, "suppress_tokens", cfile),
                "at_start": _ids(gen, "begin_suppress_tokens", gfile) or _ids(config, "begin_suppress_tokens", cfile)}
    if any(suppress.values()):
        generation["suppress_tokens"] = suppress
    preprocessing: dict[str, Any] = {}
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        preprocessing["text"] = {"tokenizer": "tokenizer.json"}
    audio = audio_preprocessing(folder, config, FEATURES)
    if audio is not None:   # transcribe(waveform): the features made as WhisperFeatureExtractor does
        preprocessing["audio"] = audio
    metadata = {**metadata, "layout": "encoder-decoder", "language": "en", "task": TASK,
                "inputs": f"{FEATURES}: input_features [1, num_mel_bins, 2 * max_source_positions] "
                          "(log-mel features)"}
    return {
        "version": 2,
        "pipeline": {
            "sessions": sessions,
            "flow": [{"run": "encoder", "when": "init"}, {"run": "decoder", "when": "step"}],
            "dataflow": [{"from": f"inputs.{FEATURES}", "to": "encoder.input_features"},
                         {"from": "encoder.last_hidden_state", "to": "decoder.encoder_hidden_states"}],
            "state": {"kv_cache": kv,
                      "cross_kv": {"past_pattern": "past_key_values.{layer}.encoder.{kv}",
                                   "present_pattern": "present.{layer}.encoder.{kv}"}},
        },
        "tokens": tokens,
        "generation": generation,
        "preprocessing": preprocessing,
        "metadata": metadata,
    }

