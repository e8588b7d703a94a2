"""onnxruntime-genai encoder-decoder bundles (``model.encoder``, Whisper) in a v2 document.

genai_v1.translate makes the decoder part (self-attention KV cache, logits, search); this adds
what the encoder brings, as onnxruntime-genai runs it (src/models/whisper.cpp):

- an ``encoder`` session in the init phase taking ``audio_features``; its cross-attention
  keys/values (``outputs.cross_present_key_names`` / ``..._value_names``) wired to the
  decoder's ``inputs.cross_past_key_names`` / ``..._value_names`` for every layer, computed
  once per audio window and fed to every step;
- the audio front end of the bundle's processor file (``model.speech.config_filename``,
  audio_processor_config.json: onnxruntime-extensions' AudioDecoder -> STFTNorm ->
  LogMelSpectrum) as ``preprocessing.audio.log_mel``;
- the decoder prompt onnxruntime-genai's Whisper examples pass (``<|startoftranscript|>``,
  ``<|en|>``, ``<|transcribe|>``, ``<|notimestamps|>``; an English-only model's is
  ``<|startoftranscript|><|notimestamps|>``) as ``tokens.decoder_prefix``, ids from the bundle's
  tokenizer.json.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import ConfigError
from .genai_session import session_settings
from .parse import describe
from .windows import hann_periodic

SPEECH_FILE = "audio_processor_config.json"   # onnxruntime-genai's default model.speech.config_filename
TOKENIZER_FILE = "tokenizer.json"
PROMPT = ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")
ENGLISH_ONLY_PROMPT = ("<|startoftranscript|>", "<|notimestamps|>")
ENGLISH_ONLY_VOCAB = 51864   # Whisper's own rule: the ".en" models have 51864 ids, the others more
_REQUIRED_PROMPT = ("<|startoftranscript|>",)
# onnxruntime-extensions speech operations and the attributes we map (others are refused)
_OPERATIONS = {
    "AudioDecoder": {"downsampling_rate", "stereo_to_mono"},
    "STFTNorm": {"n_fft", "frame_length", "hop_length", "hann_win", "_comment"},
    "LogMelSpectrum": {"chunk_size", "hop_length", "n_fft", "n_mel"},
}
_SAMPLE_RATE = 16000   # LogMelSpectrum's mel filters are for 16 kHz (0 to 8 kHz) whatever it is given


def _object(value: Any, file: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"expected an object, found {describe(value)}", file=file, path=path)
    return value


def _name(section: dict, key: str, default: str, file: str, path: str) -> str:
    value = section.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"expected a tensor name, found {describe(value)}", file=file, path=f"{path}.{key}")
    return value


def _shown(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else describe(value)


def _positive(value: Any, file: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"expected a positive integer, found {describe(value)}", file=file, path=path)
    return value


def _session(section: dict, file: str, path: str) -> dict[str, Any]:
    """A v2 session entry from a genai section's filename and session_options."""
    if "filename" not in section:
        raise ConfigError('missing "filename"', file=file, path=f"{path}.filename")
    return {"file": section["filename"],
            **session_settings(section.get("session_options", {}), file, f"{path}.session_options")}


def _read(path: str, shown: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {shown}: {exc.strerror}", file=path, path="$") from None
    except ValueError as exc:
        raise ConfigError(f"{shown} is not valid JSON: {exc}", file=path, path="$") from None


def log_mel(processor: Any, file: str) -> tuple[int, dict[str, int], float]:
    """(sample rate, preprocessing.audio.log_mel, window seconds) from an onnxruntime-extensions
    speech processor config; what it declares that we can't compute is refused naming ``file``.
    (A window given as ``hann_win`` must be the periodic Hann window onnxruntime-extensions
    makes when it is absent.)"""
    seq_path = "$.feature_extraction.sequence"
    steps = _object(processor, file, "$").get("feature_extraction")
    steps = _object(steps, file, "$.feature_extraction").get("sequence")
    if not isinstance(steps, list):
        raise ConfigError(f"expected a list of operations, found {describe(steps)}", file=file, path=seq_path)
    attrs: dict[str, dict[str, Any]] = {}
    for i, step in enumerate(steps):
        op = _object(_object(step, file, f"{seq_path}[{i}]").get("operation"), file,
                     f"{seq_path}[{i}].operation")
        kind = op.get("type")
        if kind not in _OPERATIONS:
            raise ConfigError(f'audio operation type {_shown(kind)} is not supported: onnxpipe computes '
                              f"Whisper log-mel features (AudioDecoder, STFTNorm, LogMelSpectrum)",
                              file=file, path=f"{seq_path}[{i}].operation.type")
        given = _object(op.get("attrs", {}), file, f"{seq_path}[{i}].operation.attrs")
        unknown = sorted(set(given) - _OPERATIONS[kind])
        if unknown:
            raise ConfigError(f'{kind} attribute "{unknown[0]}" is not supported (supported: '
                              f"{', '.join(sorted(_OPERATIONS[kind]))})", file=file,
                              path=f"{seq_path}[{i}].operation.attrs.{unknown[0]}")
        attrs[kind] = {k: (v, f"{seq_path}[{i}].operation.attrs.{k}") for k, v in given.items()}
    if "LogMelSpectrum" not in attrs:
        raise ConfigError("no LogMelSpectrum operation: onnxpipe feeds the encoder log-mel features "
                          "and finds no mel settings here", file=file, path=seq_path)

    def value(kind: str, key: str, default: int) -> int:
        got, path = attrs.get(kind, {}).get(key, (default, f"{seq_path}"))
        return _positive(got, file, path)

    rate = _SAMPLE_RATE   # onnxpipe resamples the caller's audio to it (and averages channels)
    if value("AudioDecoder", "downsampling_rate", rate) != rate:
        raise ConfigError(f"AudioDecoder downsampling_rate {value('AudioDecoder', 'downsampling_rate', rate)}: "
                          f"only {rate} is supported (LogMelSpectrum's mel filters are for {rate} Hz)",
                          file=file, path=attrs["AudioDecoder"]["downsampling_rate"][1])
    n_fft = value("LogMelSpectrum", "n_fft", 400)
    hop = value("LogMelSpectrum", "hop_length", 160)
    for key in ("n_fft", "hop_length"):
        if key in attrs.get("STFTNorm", {}) and value("STFTNorm", key, 0) != value("LogMelSpectrum", key, 0):
            raise ConfigError(f"STFTNorm {key} {value('STFTNorm', key, 0)} differs from LogMelSpectrum's "
                              f"{value('LogMelSpectrum', key, 0)}: one STFT setting is supported",
                              file=file, path=attrs["STFTNorm"][key][1])
    if "frame_length" in attrs.get("STFTNorm", {}) and value("STFTNorm", "frame_length", 0) != n_fft:
        raise ConfigError(f"STFTNorm frame_length {value('STFTNorm', 'frame_length', 0)} differs from "
                          f"n_fft {n_fft}: only a window as long as the FFT is supported", file=file,
                          path=attrs["STFTNorm"]["frame_length"][1])
    window, where = attrs.get("STFTNorm", {}).get("hann_win", (None, ""))
    if window is not None:
        hann = hann_periodic(n_fft)
        if not (isinstance(window, list) and len(window) == n_fft and all(
                isinstance(v, (int, float)) and abs(v - h) <= 1e-6 for v, h in zip(window, hann))):
            raise ConfigError(f"STFTNorm hann_win: only the periodic Hann window of n_fft {n_fft} samples is "
                              f"supported (sin(pi * n / {n_fft}) ** 2); this one differs", file=file, path=where)
    chunk = value("LogMelSpectrum", "chunk_size", 30)
    frames = chunk * rate // hop
    mel = {"n_fft": n_fft, "hop_length": hop, "n_mels": value("LogMelSpectrum", "n_mel", 80), "frames": frames}
    return rate, mel, float(chunk)


def prompt_ids(bundle_dir: str, file: str, vocab_size: Any = None) -> list[int]:
    """ids of Whisper's transcription prompt in the bundle's tokenizer.json (added tokens): no
    language or task tokens for an English-only model."""
    path = os.path.join(bundle_dir, TOKENIZER_FILE)
    if not os.path.isfile(path):
        raise ConfigError(f"model.encoder (whisper) needs {TOKENIZER_FILE} in the bundle for its decoder "
                          f"prompt {''.join(PROMPT)}; it is missing", file=file, path="$.model.encoder")
    added = _read(path, TOKENIZER_FILE).get("added_tokens", [])
    ids = {t.get("content"): t.get("id") for t in added if isinstance(t, dict)}
    missing = [t for t in _REQUIRED_PROMPT if t not in ids]
    if missing:
        raise ConfigError(f"{TOKENIZER_FILE} has no {missing[0]} token (Whisper's decoder prompt starts "
                          f"with it)", file=path, path="$.added_tokens")
    prompt = ENGLISH_ONLY_PROMPT if vocab_size == ENGLISH_ONLY_VOCAB else PROMPT
    return [ids[t] for t in prompt if t in ids]


def check_type(model: dict[str, Any], file: str) -> None:
    """Refuse a ``model.encoder`` of a type other than Whisper's before anything else is read."""
    kind = model.get("type")
    if "encoder" in model and kind != "whisper":
        raise ConfigError(f'model.encoder of model.type {_shown(kind)} is not supported: onnxpipe translates '
                          f'the encoder-decoder of type "whisper" (encoder, then a decoder with cross-attention '
                          f"keys/values); transducer encoder/decoder/joiner loops are not", file=file,
                          path="$.model.type")


def add_encoder(genai: dict[str, Any], document: dict[str, Any], file: str) -> dict[str, Any]:
    """``document`` (genai_v1's decoder translation) with the encoder of ``genai`` added."""
    model = genai["model"]
    check_type(model, file)
    encoder = _object(model["encoder"], file, "$.model.encoder")
    decoder = model["decoder"]
    e_in = _object(encoder.get("inputs", {}), file, "$.model.encoder.inputs")
    e_out = _object(encoder.get("outputs", {}), file, "$.model.encoder.outputs")
    d_in = _object(decoder.get("inputs", {}), file, "$.model.decoder.inputs")
    layers = _positive(decoder.get("num_hidden_layers"), file, "$.model.decoder.num_hidden_layers")
    features = _name(e_in, "audio_features", "audio_features", file, "$.model.encoder.inputs")
    for what in ("key", "value"):   # onnxruntime-genai has no default for these two
        if f"cross_past_{what}_names" not in d_in:
            raise ConfigError(f'missing "cross_past_{what}_names": onnxpipe wires the encoder\'s cross-attention '
                              f"keys/values to these decoder inputs (a decoder taking encoder_hidden_states "
                              f"itself is not supported)", file=file,
                              path=f"$.model.decoder.inputs.cross_past_{what}_names")
    wires = []
    for what in ("key", "value"):
        out = _name(e_out, f"cross_present_{what}_names", f"present_{what}_cross_%d", file,
                    "$.model.encoder.outputs")
        inp = _name(d_in, f"cross_past_{what}_names", f"past_{what}_cross_%d", file, "$.model.decoder.inputs")
        for key, pattern in ((f"$.model.encoder.outputs.cross_present_{what}_names", out),
                             (f"$.model.decoder.inputs.cross_past_{what}_names", inp)):
            if "%d" not in pattern:
                raise ConfigError(f'expected a tensor name pattern with "%d" for the layer, found '
                                  f"{describe(pattern)}", file=file, path=key)
        wires += [{"from": f"encoder.{out.replace('%d', str(i))}", "to": f"decoder.{inp.replace('%d', str(i))}"}
                  for i in range(layers)]

    speech = _object(model.get("speech", {}), file, "$.model.speech")
    other = sorted(set(speech) - {"config_filename"})
    if other:
        raise ConfigError(f'model.speech "{other[0]}" is not supported with model.encoder (Whisper): onnxpipe '
                          f"reads only config_filename, its audio processor file", file=file,
                          path=f"$.model.speech.{other[0]}")
    speech_file = speech.get("config_filename", SPEECH_FILE)
    bundle_dir = os.path.dirname(os.path.abspath(file))
    processor_path = os.path.join(bundle_dir, str(speech_file))
    if not os.path.isfile(processor_path):
        raise ConfigError(f"the audio processor file {speech_file} is missing from the bundle (onnxpipe reads "
                          "its mel settings)", file=file, path="$.model.speech.config_filename")
    rate, mel, window = log_mel(_read(processor_path, str(speech_file)), processor_path)

    pipe = document["pipeline"]
    pipe["sessions"] = {"encoder": _session(encoder, file, "$.model.encoder"), **pipe["sessions"]}
    pipe["flow"] = [{"run": "encoder", "when": "init"}, *pipe["flow"]]
    pipe["dataflow"] = [{"from": f"inputs.{features}", "to": f"encoder.{features}"}, *pipe["dataflow"], *wires]
    tokens = document["tokens"]
    tokens.pop("bos", None)   # Whisper's bos is <|endoftext|>; the decoder starts from the prompt
    tokens["decoder_prefix"] = prompt_ids(bundle_dir, file, model.get("vocab_size"))
    document["preprocessing"] = {
        "text": {"tokenizer": TOKENIZER_FILE},
        "audio": {"sample_rate": rate, "input": features, "window_seconds": window, "log_mel": mel},
    }
    return document
