"""onnxruntime-genai's Phi-4-multimodal audio (model.type "phi4mm", model.speech): what the bundle
declares, read and checked key by key.

onnxruntime-genai 0.18 runs such a bundle as: the ort-extensions feature extractor named by
speech.config_filename (AudioDecoderEx, then Phi4AudioEmbed: SpeechLib log-mel features,
ops/log_mel.py ``speechlib_log_mel_graph``) -> audio_embeds [1, frames, n_mels], audio_sizes
[ceil(frames / audio_compression_rate)]; the prompt's ``<|audio_N|>`` tags become
``<|endoftext11|>`` before tokenizing and each id 200011 is repeated audio_sizes times
(phi_multimodal_processor.cpp); the speech session (audio_embeds, audio_sizes,
audio_projection_mode: 2 with audio and no image, 3 with both) gives audio_features, which the
embedding session places itself at the 200011 ids, beside the vision session's image_features
at the 200010 ids. Its C++ loads a vision session for every phi4mm bundle, so real bundles have
a model.vision section too (the phi4mm image path, config/genai_phi4mm.py).

``check`` reads model.speech and the processor file and raises a ConfigError naming the file and
JSON path of the first thing onnxpipe can't compute; ``read_processor`` gives the feature
settings per sample rate as data for the runtime (audio/phi4_features.py); ``extend`` adds the
speech part to the phi4mm images translation: the speech session once per clip, its rows
merged by the embedding session at the 200011 ids (a second ``merge`` entry of that step).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from .parse import describe

AUDIO_TOKEN_ID, IMAGE_TOKEN_ID = 200011, 200010   # fixed in onnxruntime-genai's processor
AUDIO_TAG = "<|endoftext11|>"                      # what each <|audio_N|> becomes before tokenizing
MODE_SPEECH, MODE_BOTH = 2, 3                       # audio_projection_mode: audio and no image; both
RATES = (8000, 16000)                               # the rates Phi4AudioEmbed has settings for
SPEECH_KEYS = ("filename", "config_filename", "session_options", "inputs", "outputs")
SPEECH_INPUTS = ("audio_embeds", "audio_sizes", "audio_projection_mode", "attention_mask")
_STFT = ("n_fft", "frame_length", "hop_length", "win_fn")
# read by ort-extensions' SpeechLibLogMel and not used by its computation (it uses n_fft, n_mel)
_LOGMEL = ("n_fft", "n_mel", "hop_length", "chunk_size", "feature_first", "no_padding")
_PREFIXES = {"": "stft_normal/", "_8k": "stft_normal_8k/"}


def _object(value: Any, file: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"expected an object, found {describe(value)}", file=file, path=path)
    return value


def _int(value: Any, file: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"expected a positive integer, found {describe(value)}", file=file, path=path)
    return value


def check(model: dict[str, Any], file: str) -> dict[str, Any]:
    """model.speech of a phi4mm bundle and its processor file, checked; the processor settings
    (``read_processor``) returned."""
    speech = _object(model.get("speech"), file, "$.model.speech")
    for key in speech:
        if key not in SPEECH_KEYS:
            raise ConfigError(f'model.type "phi4mm": the key "{key}" in model.speech is not supported '
                              f'(onnxpipe reads {", ".join(SPEECH_KEYS)})', file=file, path=f"$.model.speech.{key}")
    for key in ("filename", "config_filename"):
        if not isinstance(speech.get(key), str) or not speech[key]:
            raise ConfigError(f'expected "{key}" (a file name), found {describe(speech.get(key))}',
                              file=file, path=f"$.model.speech.{key}")
    for key in ("inputs", "outputs", "session_options"):
        _object(speech.get(key, {}), file, f"$.model.speech.{key}")
    for key in speech.get("inputs", {}):
        if key not in SPEECH_INPUTS:
            raise ConfigError(f'the key "{key}" in model.speech.inputs is not supported (onnxpipe reads '
                              f'{", ".join(SPEECH_INPUTS)})', file=file, path=f"$.model.speech.inputs.{key}")
    for key in speech.get("outputs", {}):
        if key != "audio_features":
            raise ConfigError(f'the key "{key}" in model.speech.outputs is not supported (onnxpipe reads '
                              "audio_features)", file=file, path=f"$.model.speech.outputs.{key}")
    from .load import read_json

    path = os.path.join(os.path.dirname(file), speech["config_filename"])
    if not os.path.isfile(path):
        raise ConfigError(f'the audio processor file "{speech["config_filename"]}" is missing (onnxruntime-genai '
                          "refuses the bundle too)", file=file, path="$.model.speech.config_filename")
    return read_processor(read_json(path), path)


def read_processor(doc: Any, file: str) -> dict[str, Any]:
    """{"rates": {8000: settings, 16000: settings}, "compression": int, "decoder_rates": [...]}
    from an ort-extensions feature-extraction file (AudioDecoderEx + Phi4AudioEmbed); settings:
    n_fft, frame_length, hop_length, mel_n_fft, n_mels (ops/log_mel.py speechlib_log_mel_graph)."""
    seq_path = "$.feature_extraction.sequence"
    steps = _object(_object(doc, file, "$").get("feature_extraction"), file, "$.feature_extraction").get("sequence")
    if not isinstance(steps, list):
        raise ConfigError(f"expected a list of operations, found {describe(steps)}", file=file, path=seq_path)
    found: dict[str, tuple[dict[str, Any], str]] = {}
    for i, step in enumerate(steps):
        where = f"{seq_path}[{i}].operation"
        op = _object(_object(step, file, f"{seq_path}[{i}]").get("operation"), file, where)
        kind = op.get("type")
        if kind not in ("AudioDecoderEx", "Phi4AudioEmbed") or kind in found:
            raise ConfigError(f"audio operation type {describe(kind)} is not supported here: onnxpipe computes "
                              "Phi-4-multimodal's features (one AudioDecoderEx, then one Phi4AudioEmbed)",
                              file=file, path=f"{where}.type")
        found[kind] = (_object(op.get("attrs", {}), file, f"{where}.attrs"), f"{where}.attrs")
    if list(found) != ["AudioDecoderEx", "Phi4AudioEmbed"]:
        raise ConfigError(f"expected the operations AudioDecoderEx then Phi4AudioEmbed, found {list(found)}",
                          file=file, path=seq_path)
    decoder, dpath = found["AudioDecoderEx"]
    for key in decoder:
        if key != "target_sample_rates":
            raise ConfigError(f'AudioDecoderEx attribute "{key}" is not supported (supported: target_sample_rates)',
                              file=file, path=f"{dpath}.{key}")
    rates = decoder.get("target_sample_rates", [])
    if (not isinstance(rates, list) or rates != sorted(rates)
            or any(r not in RATES for r in rates)):
        raise ConfigError(f"expected ascending rates out of {list(RATES)} (the rates Phi4AudioEmbed has "
                          f"settings for), found {describe(rates)}", file=file, path=f"{dpath}.target_sample_rates")
    attrs, apath = found["Phi4AudioEmbed"]
    known = {"audio_compression_rate", "qformer_compression_rate"}
    for suffix, prefix in _PREFIXES.items():
        known |= {prefix + k for k in _STFT} | {f"logmel{suffix}/{k}" for k in _LOGMEL}
    for key in attrs:
        if key not in known:
            raise ConfigError(f'Phi4AudioEmbed attribute "{key}" is not supported (supported: '
                              f'{", ".join(sorted(known))})', file=file, path=f"{apath}.{key}")

    def value(key: str, default: int | None) -> int:
        if key not in attrs and default is None:
            raise ConfigError(f'Phi4AudioEmbed needs "{key}" (ort-extensions has no default for it)',
                              file=file, path=apath)
        return _int(attrs.get(key, default), file, f"{apath}.{key}")

    qformer = value("qformer_compression_rate", 1)
    if qformer != 1:   # ort-extensions' Phi4AudioEmbed reads it and leaves it out of audio_sizes
        raise ConfigError(f"qformer_compression_rate {qformer}: ort-extensions leaves it out of the audio "
                          "token count; only 1 is supported", file=file, path=f"{apath}.qformer_compression_rate")
    settings = {}
    for rate, suffix in ((16000, ""), (8000, "_8k")):
        prefix = _PREFIXES[suffix]
        win = attrs.get(prefix + "win_fn", "hann")
        if win != "hamming":
            raise ConfigError(f'window {describe(win)}: onnxpipe computes the "hamming" window of '
                              "Phi-4-multimodal (ort-extensions' SpeechLib path)", file=file,
                              path=f"{apath}.{prefix}win_fn")
        s = {"n_fft": value(prefix + "n_fft", None), "frame_length": value(prefix + "frame_length", None),
             "hop_length": value(prefix + "hop_length", None), "mel_n_fft": value(f"logmel{suffix}/n_fft", None),
             "n_mels": value(f"logmel{suffix}/n_mel", None)}
        if s["frame_length"] > s["n_fft"] or s["mel_n_fft"] // 2 < s["n_fft"] // 2:
            raise ConfigError(f"expected frame_length <= n_fft <= logmel n_fft, found {s['frame_length']}, "
                              f"{s['n_fft']}, {s['mel_n_fft']}", file=file, path=f"{apath}.{prefix}n_fft")
        settings[rate] = s
    return {"rates": settings, "compression": value("audio_compression_rate", 8), "decoder_rates": rates}


def audio_size(frames: int, compression: int) -> int:
    """Audio tokens of a clip of ``frames`` feature frames (ort-extensions: ceil(frames / rate))."""
    return -(-frames // compression)


def check_sections(model: dict[str, Any], file: str) -> None:
    """``check``, then the model.vision and model.embedding objects onnxruntime-genai 0.18 loads
    beside every phi4mm speech session (their keys are read by genai_multimodal.translate)."""
    check(model, file)
    for name in ("vision", "embedding"):
        if not isinstance(model.get(name), dict) or not isinstance(model[name].get("filename"), str):
            raise ConfigError(f'model.type "phi4mm": expected a model.{name} object with a "filename" '
                              f"(onnxruntime-genai loads one for every phi4mm bundle), found "
                              f"{describe(model.get(name))}", file=file, path=f"$.model.{name}")


def _session(section: dict[str, Any], file: str, path: str) -> dict[str, Any]:
    from .genai_session import session_settings

    return {"file": section["filename"],
            **session_settings(section.get("session_options", {}), file, f"{path}.session_options")}


def extend(model: dict[str, Any], doc: dict[str, Any], file: str) -> None:
    """The phi4mm images translation ``doc`` (genai_multimodal.translate, genai_phi4mm.extend)
    extended with the speech session, run once per clip (``audios=``) before the embedding, and
    a second entry in the embedding step's ``merge``: its audio_features rows at the 200011 ids,
    beside the vision session's image_features at the 200010 ids."""
    speech, embedding = model["speech"], model["embedding"]
    s_in = speech.get("inputs", {})
    embeds = s_in.get("audio_embeds", "audio_embeds")
    features = speech.get("outputs", {}).get("audio_features", "audio_features")
    fed = embedding.get("inputs", {}).get("audio_features", "audio_features")
    pipeline = doc["pipeline"]
    pipeline["sessions"] = {"speech": _session(speech, file, "$.model.speech"), **pipeline["sessions"]}
    flow = pipeline["flow"]
    at = next(i for i, step in enumerate(flow) if step["run"] == "embedding")
    flow[at]["merge"] = [flow[at]["merge"], {"from": f"speech.{features}", "into": fed, "token": "audio_token"}]
    flow.insert(at, {"run": "speech", "when": "init", "loop": "per_image", "loop_over": embeds})
    doc["tokens"].setdefault("extra", {})["audio_token"] = AUDIO_TOKEN_ID
    doc.setdefault("preprocessing", {})["speech"] = {
        "config": speech["config_filename"], "audio_embeds": embeds,
        "audio_sizes": s_in.get("audio_sizes", "audio_sizes"),
        "projection_mode": s_in.get("audio_projection_mode", "audio_projection_mode"),
        "attention_mask": s_in.get("attention_mask", "audio_attention_mask")}
