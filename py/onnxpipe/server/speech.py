"""POST /v1/audio/speech: OpenAI's speech request over a speech bundle, checked as
web/src/engine/audio.ts checks it; the audio goes out sentence by sentence as pipe.speak makes it."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..audio.wav import encode_wav
from ..engine import controls as control_values
from ..errors import InputError
from .chat_structured import is_object, shown
from .errors import bad_request

FIELDS = ["model", "input", "voice", "response_format", "speed", "controls", "stream_format"]
FORMATS = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac"}
# flac is encoded by libsndfile (the `soundfile` package, part of the `serve` extra) once the
# speech is done: its header states the length, so it is sent whole; wav and pcm stream
NO_FLAC = ('response_format: "flac" needs the soundfile package (pip install soundfile); '
           'ask for "wav" or "pcm", or install it')


@dataclass
class SpeechCall:
    model: str
    input: str
    format: str
    controls: dict


def speech_call(params) -> SpeechCall:
    """Check the request's own fields (those the bundle decides come in ``controls_of``)."""
    if not is_object(params):
        raise bad_request("expected a request object {model, input, voice, ...}")
    for name in params:
        if name not in FIELDS:
            raise bad_request(f"{name}: not supported by onnxpipe's speech (supported: {', '.join(FIELDS)})", name)
    model = params.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request(f"model: expected the id of a served voice (GET /v1/models), found {shown(model)}", "model")
    text = params.get("input")
    if not isinstance(text, str) or not text.strip():
        raise bad_request("input: expected the text to speak", "input")
    stream_format = params.get("stream_format", "audio")
    if stream_format != "audio":
        raise bad_request(f'stream_format: onnxpipe\'s server streams "audio" (sentence by sentence), found '
                          f"{shown(stream_format)}", "stream_format")
    fmt = params.get("response_format", "wav")
    if fmt not in FORMATS:
        raise bad_request(f'response_format: expected "wav", "pcm" or "flac", found {shown(fmt)}', "response_format")
    if fmt == "flac" and not flac_available():
        raise bad_request(NO_FLAC, "response_format")
    given = params.get("controls") or {}
    if not is_object(given):
        raise bad_request(f"controls: expected an object {{name: value}} of the voice's controls, found {shown(given)}",
                          "controls")
    return SpeechCall(model, text, fmt, {k: params[k] for k in ("voice", "speed") if params.get(k) is not None}
                      | {"controls": dict(given)})


def controls_of(pipe, call: SpeechCall) -> dict:
    """The voice controls a request sets: ``voice`` and ``speed`` are the bundle's controls of those
    names (a bundle with one voice takes "default" or none); ``controls`` sets others by name."""
    declared = {c.name: c for c in pipe.controls}
    controls = dict(call.controls.pop("controls"))
    if "voice" in call.controls:
        voice, choice = call.controls["voice"], declared.get("voice")
        names = list(choice.options) if choice is not None else []
        if not isinstance(voice, str) or (voice not in names if choice is not None else voice != "default"):
            expected = f"one of {', '.join(names)}" if choice is not None else '"default" (this bundle has one voice)'
            raise bad_request(f"voice: expected {expected}, found {shown(voice)}", "voice")
        if choice is not None:
            controls["voice"] = voice
    if "speed" in call.controls:
        if "speed" not in declared:
            raise bad_request(f"speed: this voice has no speed control (its controls: {', '.join(declared) or 'none'})",
                              "speed")
        controls["speed"] = call.controls["speed"]
    try:
        control_values.resolve(pipe.spec.pipeline.inputs, controls)
    except InputError as exc:
        raise bad_request(f"controls: {exc.message}", "controls") from None
    return controls


def speak_job(text: str, controls: dict):
    """The scheduler job: each sentence's samples are emitted as they are made."""
    def job(pipe, emit, cancelled):
        return pipe.speak(text, on_audio=lambda samples, sentence: emit(samples), cancel=cancelled, **controls)
    return job


def flac_available() -> bool:
    try:
        import soundfile  # noqa: F401
    except (ImportError, OSError):   # OSError: the package without its libsndfile
        return False
    return True


def flac(chunks: list, sample_rate: int) -> bytes:
    """The sentences' samples as one 16-bit mono FLAC file: the very 16-bit samples the WAV
    and pcm formats carry (the WAV encoder's rounding and clipping), losslessly packed."""
    import io

    import numpy as np
    import soundfile

    pcm = np.frombuffer(b"".join(pcm16(c) for c in chunks), dtype="<i2")
    out = io.BytesIO()
    soundfile.write(out, pcm, sample_rate, format="FLAC", subtype="PCM_16")
    return out.getvalue()


def pcm16(samples) -> bytes:
    """Float samples as 16-bit little-endian PCM (the WAV encoder's rounding and clipping)."""
    return encode_wav(samples, 1)[44:]


def streamed_wav_header(sample_rate: int) -> bytes:
    """A WAV header for audio of unknown length: sizes at their maximum, as streaming servers send
    them (readers take the data to the end of the file; onnxpipe's decode_wav does)."""
    size = 0xFFFFFFFF
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", size, b"WAVE", b"fmt ", 16, 1, 1, sample_rate,
                       sample_rate * 2, 2, 16, b"data", size - 36)
