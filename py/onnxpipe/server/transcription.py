"""POST /v1/audio/transcriptions: a multipart WAV upload -> text, in OpenAI's response formats
(json, text, verbose_json with segments, srt, vtt); a segment is one of the bundle's windows."""

from __future__ import annotations

from ..audio.wav import decode_wav
from ..errors import InputError
from .chat_structured import shown
from .errors import bad_request

FIELDS = ["model", "file", "response_format"]
FORMATS = ["json", "text", "verbose_json", "srt", "vtt"]


def check_form(form) -> tuple[str, str]:
    """(model, response_format) of the form; every field is one this endpoint takes."""
    for name in form.keys():
        if name not in FIELDS:
            raise bad_request(f"{name}: not supported by onnxpipe's transcriptions (supported: {', '.join(FIELDS)})", name)
    model = form.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request(f"model: expected the id of a served recogniser (GET /v1/models), found {shown(model)}", "model")
    fmt = form.get("response_format") or "json"
    if fmt not in FORMATS:
        raise bad_request(f"response_format: expected one of {', '.join(FORMATS)}, found {shown(fmt)}", "response_format")
    if form.get("file") is None or isinstance(form.get("file"), str):
        raise bad_request("file: expected an uploaded audio file (multipart/form-data)", "file")
    return model, fmt


def mono(blob: bytes) -> tuple[list[float], int]:
    """(samples, rate) of a WAV file, channels averaged; other files are refused naming ``file``."""
    try:
        samples, rate, channels = decode_wav(blob)
    except InputError as exc:
        raise bad_request(f"file: {exc.message} (the server reads WAV files)", "file") from None
    if channels > 1:
        samples = [sum(samples[i:i + channels]) / channels for i in range(0, len(samples), channels)]
    if not samples:
        raise bad_request("file: the WAV file holds no samples", "file")
    return samples, rate


def transcribe_job(samples, rate):
    def job(pipe, emit, cancelled):
        return pipe.transcribe(samples, rate, on_text=emit, cancel=cancelled)
    return job


def _stamp(seconds: float, comma: bool) -> str:
    ms = int(round(seconds * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{',' if comma else '.'}{ms:03d}"


def segments(result) -> list[dict]:
    return [{"id": w.index, "start": round(w.start_seconds, 3), "end": round(w.end_seconds, 3),
             "text": w.text.strip(), "tokens": list(w.tokens)} for w in result.windows if w.text.strip()]


def formatted(result, fmt: str):
    """(body, media type): a dict for the JSON formats, a string for the others."""
    text = result.text.strip()
    if fmt == "json":
        return {"text": text}, "application/json"
    if fmt == "text":
        return text + "\n", "text/plain; charset=utf-8"
    parts = segments(result)
    if fmt == "verbose_json":
        return {"task": "transcribe", "duration": round(result.audio_seconds, 3), "text": text,
                "segments": parts}, "application/json"
    if fmt == "srt":
        cues = [f"{n}\n{_stamp(s['start'], True)} --> {_stamp(s['end'], True)}\n{s['text']}\n"
                for n, s in enumerate(parts, 1)]
        return "\n".join(cues), "application/x-subrip; charset=utf-8"
    cues = [f"{_stamp(s['start'], False)} --> {_stamp(s['end'], False)}\n{s['text']}\n" for s in parts]
    return "WEBVTT\n\n" + "\n".join(cues), "text/vtt; charset=utf-8"
