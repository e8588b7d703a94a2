"""transformers.js / Optimum folders translated to pipeline.json v2 at load.

Such a folder holds config.json, generation_config.json, tokenizer files and the decoder as
``onnx/model{suffix}.onnx`` (or ``decoder_model_merged{suffix}.onnx``; Optimum's own export
puts them beside config.json). One file per precision: ``dtype`` picks one by transformers.js's
names; without it, each execution provider gets the variant that suits it (``DEFAULT_ORDER``).
``model_type`` is kept as metadata only: the sessions' own I/O decide how the model runs.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..errors import BundleError, ConfigError
from . import tjs_encoder_decoder, tjs_vision

CONFIG_FILE = "config.json"
GENERATION_FILE = "generation_config.json"
ONNX_DIR = "onnx"
# transformers.js's dtype names and the file suffix each one reads (its DEFAULT_DTYPE_SUFFIX_MAPPING)
DTYPE_SUFFIX = {"fp32": "", "fp16": "_fp16", "q8": "_quantized", "int8": "_int8", "uint8": "_uint8",
                "q4": "_q4", "q4f16": "_q4f16", "bnb4": "_bnb4"}
# decoder file names, newest layout first (decoder_model_merged: Optimum's If-merged decoder)
BASE_NAMES = ("model", "decoder_model_merged")
# Default variant per execution provider, first offered wins:
# - cpu (native onnxruntime): fp32 is the exact reference and its kernels are the fast ones;
#   fp16 has few CPU kernels (casts everywhere), int4/int8 trade accuracy for speed.
# - wasm: fp16, then fp32. Measured on SmolLM2-135M (bench/browser_dtypes.mjs, one thread):
#   fp16 decodes at 0.89x fp32 with every greedy token equal to fp32 over 5 prompts, at half the
#   download and storage (the WASM heap stops at 4 GB); q8 (transformers.js's WASM default) is
#   0.77x and agreed on ~11% of tokens; q4/q4f16 open with their MatMulNBits expanded to fp32 at
#   load (heap/nbits.py: the fp32 file's speed, 8x q4's bytes in the heap) but are q4's tokens,
#   not fp32's. Faithful first, then small, then fast.
# - webgpu: q4f16, then fp16: shader-f16 math and the smallest download, as transformers.js advises.
DEFAULT_ORDER = {
    "cpu": ("fp32", "q4", "q8", "int8", "uint8", "fp16", "q4f16", "bnb4"),
    "wasm": ("fp16", "fp32", "q8", "int8", "uint8", "q4f16", "q4", "bnb4"),
    "webgpu": ("q4f16", "fp16", "q4", "fp32", "q8", "int8", "uint8", "bnb4"),
}
_SAMPLING_KEYS = ("do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty")
_FILE_RX = re.compile(r"^(%s)(%s)?\.onnx$" % ("|".join(BASE_NAMES),
                                               "|".join(s for s in DTYPE_SUFFIX.values() if s)))


def looks_like(folder: str) -> bool:
    """True for a folder laid out as transformers.js / Optimum expect (config.json at the top)."""
    return os.path.isfile(os.path.join(folder, CONFIG_FILE))


def _model_dir(folder: str) -> str:
    """Where the ONNX files are: onnx/ (transformers.js) or the folder itself (Optimum)."""
    sub = os.path.join(folder, ONNX_DIR)
    return ONNX_DIR if os.path.isdir(sub) else ""


def _names(folder: str) -> list[str]:
    rel_dir = _model_dir(folder)
    return sorted(os.listdir(os.path.join(folder, rel_dir) if rel_dir else folder))


def layout(folder: str) -> str:
    """"decoder", "encoder-decoder" (encoder_model*.onnx) or "vision-language" (vision_encoder /
    embed_tokens*.onnx), from the ONNX file names."""
    names = [n for n in _names(folder) if n.endswith(".onnx")]
    if any(n.startswith(("vision_encoder", "embed_tokens")) for n in names):
        return "vision-language"
    if any(n.startswith(tjs_encoder_decoder.ENCODER) for n in names):
        return "encoder-decoder"
    return "decoder"


def dtype_files(folder: str) -> dict[str, str]:
    """dtype -> bundle-relative ONNX file (``model`` preferred over the merged decoder; in an
    encoder-decoder folder, the merged decoder of each dtype that has its encoder too)."""
    rel_dir = _model_dir(folder)
    kind = layout(folder)
    if kind == "encoder-decoder":
        return {d: pair[1] for d, pair in tjs_encoder_decoder.files(folder, rel_dir, DTYPE_SUFFIX).items()}
    if kind == "vision-language":
        return {d: triple[2] for d, triple in tjs_vision.files(folder, rel_dir, DTYPE_SUFFIX).items()}
    names = _names(folder)
    found: dict[str, str] = {}
    by_suffix = {s: d for d, s in DTYPE_SUFFIX.items()}
    for base in BASE_NAMES:
        for name in names:
            m = _FILE_RX.match(name)
            if m and m.group(1) == base:
                dtype = by_suffix[m.group(2) or ""]
                found.setdefault(dtype, f"{rel_dir}/{name}" if rel_dir else name)
    return {d: found[d] for d in DTYPE_SUFFIX if d in found}


def offered_dtypes(folder: str) -> list[str]:
    """The transformers.js dtypes this folder has a decoder file for, in DTYPE_SUFFIX order."""
    return list(dtype_files(folder))


def _external_data(folder: str, rel: str) -> list[str]:
    """model.onnx_data, model.onnx_data_1, ... as Optimum splits them (also model.onnx.data)."""
    out = []
    for first in (rel + "_data", rel + ".data"):
        if os.path.isfile(os.path.join(folder, first)):
            out.append(first)
            i = 1
            while os.path.isfile(os.path.join(folder, f"{first}_{i}")):
                out.append(f"{first}_{i}")
                i += 1
    return out


def _read(folder: str, name: str, required: bool) -> dict[str, Any]:
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        if required:
            raise BundleError(f"{folder}: no {name} (a transformers.js folder needs config.json)")
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:   # ValueError: bad JSON, or bytes that are not UTF-8
        raise BundleError(f"{path}: cannot read it as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BundleError(f"{path}: expected a JSON object at the top level")
    return data


def _length(doc: dict[str, Any], key: str, folder: str, name: str) -> int | None:
    """A positive integer length from ``doc[key]`` (None when absent or null)."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"expected a positive integer, found {value!r}",
                          file=os.path.join(folder, name), path=f"$.{key}")
    return value


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, int)]


def choose_files(folder: str, dtype: str | None) -> dict[str, str]:
    """Execution provider ("cpu", "wasm", "webgpu") -> ONNX file; one key "default" for a dtype."""
    files = dtype_files(folder)
    if not files and layout(folder) != "decoder":
        where = os.path.join(folder, _model_dir(folder))
        found = [n for n in _names(folder) if n.endswith(".onnx")]
        if layout(folder) == "encoder-decoder":
            need = f"{tjs_encoder_decoder.ENCODER}<suffix>.onnx and {tjs_encoder_decoder.DECODER}<suffix>.onnx"
        else:
            need = tjs_vision.needed(folder)
        raise BundleError(f"{where}: a {layout(folder)} folder needs {need} of the same dtype; found "
                          f"{', '.join(found)}")
    if not files:
        where = os.path.join(folder, _model_dir(folder))
        raise BundleError(f"{where}: no ONNX decoder here; a transformers.js folder has "
                          f"onnx/model.onnx (or onnx/model_<dtype>.onnx, e.g. model_q4.onnx, "
                          f"or decoder_model_merged.onnx)")
    if dtype is not None:
        if dtype not in files:
            known = "" if dtype in DTYPE_SUFFIX else f" (transformers.js dtypes: {', '.join(DTYPE_SUFFIX)})"
            raise BundleError(f'{folder}: dtype "{dtype}" is not in this folder{known}; it has '
                              f"{', '.join(files)}")
        return {"default": files[dtype]}
    return {ep: files[next(d for d in order if d in files)] for ep, order in DEFAULT_ORDER.items()}


def chosen_dtypes(folder: str, dtype: str | None) -> dict[str, str]:
    """Execution provider -> dtype the translation picks (for inspect and the UI)."""
    by_file = {f: d for d, f in dtype_files(folder).items()}
    return {ep: by_file[f] for ep, f in choose_files(folder, dtype).items()}


def token_ids_of(config: dict[str, Any], gen: dict[str, Any]):
    """key -> ids: generation_config.json first, as transformers reads it, then config.json
    (and its text_config, where transformers 5 nests a multimodal model's ids)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}

    def token_ids(key: str) -> list[int]:
        for doc in (gen, config, text):
            if doc.get(key) is not None:
                return _ids(doc[key])
        return []
    return token_ids


def translate(folder: str, dtype: str | None = None) -> dict[str, Any]:
    """A v2 pipeline document for the transformers.js folder ``folder``."""
    config = _read(folder, CONFIG_FILE, True)
    gen = _read(folder, GENERATION_FILE, False)
    kind = layout(folder)
    chosen = choose_files(folder, dtype)
    if kind != "decoder":
        by_file = {f: d for d, f in dtype_files(folder).items()}
        module = tjs_encoder_decoder if kind == "encoder-decoder" else tjs_vision
        sets = module.files(folder, _model_dir(folder), DTYPE_SUFFIX)
        metadata = {"source": "transformers.js folder", "model_type": config.get("model_type"), "dtype": dtype,
                    "dtypes": offered_dtypes(folder),
                    "dtype_by_provider": None if dtype else chosen_dtypes(folder, None)}
        files = {ep: sets[by_file[f]] for ep, f in chosen.items()}
        external = lambda rel: _external_data(folder, rel)   # noqa: E731
        if kind == "encoder-decoder":
            return tjs_encoder_decoder.translate(folder, config, gen, files, dtype, external, metadata,
                                                 GENERATION_FILE)
        return tjs_vision.translate(folder, config, gen, files, dtype, external, metadata, token_ids_of(config, gen),
                                    _hybrid_state(config))
    data = {ep: _external_data(folder, f) for ep, f in chosen.items()}
    session: dict[str, Any] = {"file": chosen["default"] if dtype else chosen}
    if any(data.values()):
        session["external_data"] = data["default"] if dtype else data

    kv: dict[str, Any] = {"format": "separate"}   # past_key_values.N.key -> present.N.key
    heads, hidden = config.get("num_attention_heads"), config.get("hidden_size")
    kv_heads = config.get("num_key_value_heads", heads)
    head_size = config.get("head_dim") or (hidden // heads if isinstance(hidden, int) and
                                           isinstance(heads, int) and heads else None)
    if isinstance(kv_heads, int):
        kv["num_heads"] = kv_heads   # used only where the file leaves these dims symbolic
    if isinstance(head_size, int):
        kv["head_size"] = head_size

    state: dict[str, Any] = {"kv_cache": kv}
    recurrent = _hybrid_state(config)
    if recurrent:
        state["recurrent"] = recurrent

    sampling = {k: gen[k] for k in _SAMPLING_KEYS if k in gen and gen[k] is not None}
    context = _length(config, "max_position_embeddings", folder, CONFIG_FILE) or 2048
    limit = _length(gen, "max_length", folder, GENERATION_FILE) or context
    generation: dict[str, Any] = {"loop": "autoregressive", "sampling": sampling,
                                  "max_length": min(limit, context)}
    if isinstance(gen.get("min_length"), int):
        generation["min_length"] = gen["min_length"]
    def token_ids(key: str) -> list[int]:   # generation_config.json first, as transformers reads it
        value = gen.get(key)
        return _ids(value if value is not None else config.get(key))

    tokens: dict[str, Any] = {"eos": token_ids("eos_token_id")}
    for key in ("bos", "pad"):
        ids = token_ids(f"{key}_token_id")
        if ids:
            tokens[key] = ids[0]

    text: dict[str, Any] = {"tokenizer": "tokenizer.json"}
    for key, name in (("config", "tokenizer_config.json"), ("chat_template", "chat_template.jinja")):
        if os.path.isfile(os.path.join(folder, name)):
            text[key] = name
    metadata: dict[str, Any] = {"source": "transformers.js folder", "model_type": config.get("model_type"),
                                "dtype": dtype, "dtypes": offered_dtypes(folder),
                                "dtype_by_provider": None if dtype else chosen_dtypes(folder, None)}
    if isinstance(gen.get("max_new_tokens"), int):
        metadata["max_new_tokens"] = gen["max_new_tokens"]   # no v2 key yet: a caller's default
    return {
        "version": 2,
        "pipeline": {
            "sessions": {"decoder": session},
            "flow": [{"run": "decoder", "when": "step"}],
            "state": state,
        },
        "tokens": tokens,
        "generation": generation,
        "preprocessing": {"text": text} if os.path.isfile(os.path.join(folder, "tokenizer.json")) else {},
        "metadata": metadata,
    }


def _hybrid_state(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Conv windows / linear-attention state of a hybrid decoder, per config.json's layer_types
    (LFM2: ``conv``; Qwen3.5 style: ``linear_attention``, also under text_config), under
    transformers.js' names ``past_conv.N`` -> ``present_conv.N`` and ``past_recurrent.N`` ->
    ``present_recurrent.N``; shapes come from the graph (pipeline.state.recurrent)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    types = text.get("layer_types") or config.get("layer_types")
    if not isinstance(types, list):
        return []
    entries = []
    for kind, which in (("conv", ("conv", "linear_attention")), ("recurrent", ("linear_attention",))):
        layers = [i for i, t in enumerate(types) if t in which]
        if layers:
            entries.append({"input": f"past_{kind}.{{layer}}", "output": f"present_{kind}.{{layer}}",
                            "layers": layers, "checkpoints": 4})
    return entries


def dtype_of(folder: str, files) -> str | None:
    """The dtype of the first of ``files`` (bundle-relative) that is a decoder variant here."""
    by_file = {f: d for d, f in dtype_files(folder).items()}
    return next((by_file[f] for f in files if f in by_file), None)
