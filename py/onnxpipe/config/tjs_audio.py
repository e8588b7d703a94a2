"""preprocessor_config.json of a transformers.js / Optimum Whisper folder -> ``preprocessing.audio``.

transformers' ``WhisperFeatureExtractor`` is what these folders are made for: the waveform cut
or zero-padded to ``chunk_length`` seconds, an STFT with reflect padding (its last frame
dropped), Slaney mel filters, log10, floored at the peak - 8, then (x + 4) / 4. That is
``log_mel`` with ``pad_waveform`` and ``center_pad: "reflect"`` (ops/log_mel.py). A key whose
value the graph would not honour is refused naming the file and its JSON path.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import ConfigError
from .windows import mel_filters
from .parse import describe

FILE = "preprocessor_config.json"
EXTRACTOR = "WhisperFeatureExtractor"
RATE = 16000   # transformers' Whisper mel filters stop at 8 kHz: half of this rate and no other
_DEFAULTS = {"feature_size": 80, "sampling_rate": RATE, "hop_length": 160, "chunk_length": 30, "n_fft": 400}
_ZERO = ("padding_value", "dither")   # pads with zeros, adds no noise
_INFORMATIONAL = {"processor_class": str, "return_attention_mask": bool}   # shape no feature value
_KNOWN = {"feature_extractor_type", "n_samples", "nb_max_frames", "padding_side", "mel_filters",
          *_DEFAULTS, *_ZERO, *_INFORMATIONAL}
_FILTER_TOLERANCE = 1e-6


def _int(doc: dict, key: str, file: str) -> int:
    value = doc.get(key, _DEFAULTS.get(key))
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"expected a positive integer, found {describe(value)}", file=file, path=f"$.{key}")
    return value


def _check_filters(given: Any, n_mels: int, n_fft: int, file: str) -> None:
    """An older export's stored filter bank (transformers recomputes it): it must be ours."""
    ours = mel_filters(RATE, n_fft, n_mels)
    rows = given
    if isinstance(given, list) and len(given) == n_fft // 2 + 1 and all(
            isinstance(r, list) and len(r) == n_mels for r in given):
        rows = [list(col) for col in zip(*given)]   # [bins][n_mels], transformers' own layout
    ok = isinstance(rows, list) and len(rows) == n_mels and all(
        isinstance(r, list) and len(r) == len(o) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v - w) <= _FILTER_TOLERANCE
            for v, w in zip(r, o)) for r, o in zip(rows, ours))
    if not ok:
        raise ConfigError(f"expected the Slaney mel filter bank of {n_mels} bands x {n_fft // 2 + 1} FFT bins "
                          f"(0 Hz to 8 kHz, as WhisperFeatureExtractor computes it) within {_FILTER_TOLERANCE}; "
                          f"these filters differ, and onnxpipe computes only that bank", file=file,
                          path="$.mel_filters")


def audio_preprocessing(folder: str, config: dict, input_name: str) -> dict[str, Any] | None:
    """``preprocessing.audio`` from the folder's preprocessor_config.json (None without one)."""
    file = os.path.join(folder, FILE)
    if not os.path.isfile(file):
        return None
    try:
        with open(file, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {FILE}: {exc}", file=file, path="$") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"expected an object, found {describe(doc)}", file=file, path="$")
    unknown = sorted(set(doc) - _KNOWN)
    if unknown:
        raise ConfigError(f'key "{unknown[0]}" is not supported: onnxpipe honours the WhisperFeatureExtractor '
                          f"keys {', '.join(sorted(_KNOWN))}", file=file, path=f"$.{unknown[0]}")
    kind = doc.get("feature_extractor_type", EXTRACTOR)
    if kind != EXTRACTOR:
        raise ConfigError(f'expected "{EXTRACTOR}" (log-mel features onnxpipe computes), found {describe(kind)}',
                          file=file, path="$.feature_extractor_type")
    for key in _ZERO:
        value = doc.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != 0:
            raise ConfigError(f"expected 0 (onnxpipe pads with zeros and adds no dither noise), found "
                              f"{describe(value)}", file=file, path=f"$.{key}")
    if doc.get("padding_side", "right") != "right":
        raise ConfigError(f'expected "right" (the audio first, then silence), found {describe(doc["padding_side"])}',
                          file=file, path="$.padding_side")
    for key, kind_ in _INFORMATIONAL.items():
        if key in doc and not isinstance(doc[key], kind_):
            raise ConfigError(f"expected a {'string' if kind_ is str else 'boolean'}, found {describe(doc[key])}",
                              file=file, path=f"$.{key}")
    rate = _int(doc, "sampling_rate", file)
    if rate != RATE:
        raise ConfigError(f"sampling_rate {rate}: only {RATE} is supported (WhisperFeatureExtractor's mel "
                          f"filters end at 8 kHz, which is half of {RATE} Hz only)", file=file, path="$.sampling_rate")
    n_mels, hop, n_fft = (_int(doc, k, file) for k in ("feature_size", "hop_length", "n_fft"))
    samples = _int(doc, "chunk_length", file) * rate
    frames = samples // hop
    for key, want in (("n_samples", samples), ("nb_max_frames", frames)):
        if key in doc and doc[key] != want:
            raise ConfigError(f"expected {want} (from chunk_length, sampling_rate and hop_length, as "
                              f"WhisperFeatureExtractor derives it), found {describe(doc[key])}", file=file,
                              path=f"$.{key}")
    cfile = os.path.join(folder, "config.json")
    for key, got, want in (("feature_size", n_mels, config.get("num_mel_bins")),
                           ("nb_max_frames", frames, 2 * config["max_source_positions"]
                            if isinstance(config.get("max_source_positions"), int) else None)):
        if want is not None and got != want:
            raise ConfigError(f"{key} {got} differs from what the encoder takes ({want}, from {cfile}: "
                              f"num_mel_bins x 2 * max_source_positions)", file=file, path=f"$.{key}")
    if "mel_filters" in doc:
        _check_filters(doc["mel_filters"], n_mels, n_fft, file)
    mel = {"n_fft": n_fft, "hop_length": hop, "n_mels": n_mels, "frames": frames,
           "center_pad": "reflect", "pad_waveform": True}
    return {"sample_rate": rate, "input": input_name, "window_seconds": samples / rate, "log_mel": mel}
