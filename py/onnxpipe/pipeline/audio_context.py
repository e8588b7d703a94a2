"""How many feature frames the encoder takes for one window (``preprocessing.audio.context``).

whisper.cpp's audio_ctx: Whisper's encoder is trained on 30 s windows (3000 frames, 1500
positions), but its cost grows with the frames it is given. With ``encode: "speech"`` it takes
only the frames that hold the window's audio (plus ``margin_seconds``), rounded up to
``bucket_seconds`` and to ``frame_multiple``; the encoder graph cuts its features and its
positional embeddings to that count (export/whisper_onnx.py). ``encode: "window"`` gives every
frame: the reference. Whisper trained on whole windows may loop on a short context ("Yes,
please. Yes, please. ..."): ``margin_seconds`` of the silence that follows keeps it from that
(bench/asr_context.py measures it), and a window whose text still looks like a loop (it
compresses more than ``fallback_compression_ratio`` with zlib, the test OpenAI's Whisper uses to
retry a decode, or it ran to max_length) is decoded again over the whole window. Pure Python
(the browser path has no numpy).
"""

from __future__ import annotations

import math
import zlib

from ..errors import ConfigError

PATH = "$.preprocessing.audio.context"


def window_frames(audio) -> int:
    """Frames of a whole window."""
    return round(audio.window_seconds * audio.context.frames_per_second)


def check(loaded) -> None:
    """Load-time checks of ``preprocessing.audio.context`` against the window and the flow."""
    audio = loaded.spec.preprocessing.audio
    if audio is None or audio.context is None:
        return
    ctx, file = audio.context, loaded.config.file
    full = audio.window_seconds * ctx.frames_per_second
    if abs(full - round(full)) > 1e-6:
        raise ConfigError(f"expected window_seconds * frames_per_second to be a whole number of frames, found "
                          f"{audio.window_seconds} * {ctx.frames_per_second} = {full:g}", file=file,
                          path=f"{PATH}.frames_per_second")
    if round(full) % ctx.frame_multiple:
        raise ConfigError(f"expected a divisor of the window's {round(full)} frames, found {ctx.frame_multiple}",
                          file=file, path=f"{PATH}.frame_multiple")
    if ctx.bucket_seconds > audio.window_seconds:
        raise ConfigError(f"expected bucket_seconds of at most window_seconds ({audio.window_seconds}), found "
                          f"{ctx.bucket_seconds}", file=file, path=f"{PATH}.bucket_seconds")
    plan = loaded.executor.plan
    fed = [(session, name) for session in loaded.sessions.values() for name in session.inputs
           if _fed_by(plan, session.name, name) == ctx.frames_input]
    if not fed:
        raise ConfigError(f'"{ctx.frames_input}" feeds no session input: the encoder must take the count of frames '
                          f"to encode and cut its positional embeddings to it (onnxpipe's Whisper export, "
                          f'"input_frames", wired {{"from": "inputs.input_frames", "to": "encoder.input_frames"}}). '
                          f"onnxruntime-genai and transformers.js Whisper encoders add the embeddings of a fixed "
                          f"1500 positions, so they take whole windows: leave context out for them", file=file,
                          path=f"{PATH}.frames_input")
    for session, name in fed:
        if session.inputs[name].dtype != "int64":
            raise ConfigError(f'"{ctx.frames_input}" feeds {session.name}.{name}, which takes '
                              f"{session.inputs[name].dtype}; expected int64 [1]", file=file,
                              path=f"{PATH}.frames_input")


def _fed_by(plan, session: str, name: str) -> str | None:
    for plans in plan.phases.values():
        for p in plans:
            if p.step.run == session:
                for feed, kind, key in p.feeds:
                    if feed == name and kind == "pipeline":
                        return key
    return None


def frames(audio, samples: int) -> int:
    """Frames the encoder takes for a window of ``samples`` samples at ``audio.sample_rate``."""
    ctx = audio.context
    full = window_frames(audio)
    if ctx.encode == "window":
        return full
    seconds = samples / audio.sample_rate + ctx.margin_seconds
    seconds = math.ceil(seconds / ctx.bucket_seconds - 1e-9) * ctx.bucket_seconds
    count = math.ceil(seconds * ctx.frames_per_second - 1e-6)
    count = -(-count // ctx.frame_multiple) * ctx.frame_multiple
    return max(ctx.frame_multiple, min(full, count))


def looped(audio, text: str, finish_reason: str, max_new_tokens) -> bool:
    """Whether a window decoded on a short context should be decoded again over the whole window."""
    ctx = audio.context
    if ctx is None or ctx.encode == "window" or ctx.fallback_compression_ratio == 0 or finish_reason == "cancelled":
        return False
    if finish_reason == "length" and max_new_tokens is None:   # ran to max_length, not the caller's cap
        return True
    raw = text.encode("utf-8")
    return bool(raw) and len(raw) / len(zlib.compress(raw)) > ctx.fallback_compression_ratio
