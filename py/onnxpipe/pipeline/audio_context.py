"""How many feature frames the encoder takes for one window (``preprocessing.audio.context``).

whisper.cpp's audio_ctx: Whisper's encoder is trained on 30 s windows (3000 frames, 1500
positions), but its cost grows with the frames it is given. With ``encode: "speech"`` it takes
only the frames that hold the window's audio (plus ``margin_seconds``), rounded up to
``bucket_seconds`` and to ``frame_multiple``; the encoder graph cuts its features and its
positional embeddings to that count (export/whisper_onnx.py). ``encode: "window"`` gives every
frame: the reference. Whisper trained on whole windows may loop on a short context ("Yes,
please. Yes, please. ..."): ``margin_seconds`` of the silence that follows makes that rarer
(bench/asr_context.py measures it), and a window whose text still looks like a loop is decoded
again over the whole window, the reference: it says a run of ``fallback_repeat_tokens`` tokens
twice in a row, it compresses more than ``fallback_compression_ratio`` with zlib (the test
OpenAI's Whisper uses to retry a decode), or it ran to max_length or to its budget of
``fallback_tokens_per_second`` (which bounds what a loop costs). Pure Python (the browser path
has no numpy).
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


BUDGET_BASE_TOKENS = 16   # a short clip's budget: "Yes." has 2 tokens, a spelled-out number many more


def budget(audio, samples: int, max_new_tokens):
    """The most tokens a short-context decode of ``samples`` samples may write: the caller's cap,
    or ``fallback_tokens_per_second`` of its audio (plus 16) if that is fewer."""
    ctx = audio.context
    if ctx is None or ctx.encode == "window" or ctx.fallback_tokens_per_second == 0:
        return max_new_tokens
    own = BUDGET_BASE_TOKENS + math.ceil(ctx.fallback_tokens_per_second * samples / audio.sample_rate)
    return own if max_new_tokens is None else min(own, max_new_tokens)


def _budget_ended(finish_reason: str, max_new_tokens, budgeted) -> bool:
    """The decode ran to ``budget``'s own cap, not the caller's."""
    return (finish_reason == "length" and budgeted is not None
            and (max_new_tokens is None or budgeted < max_new_tokens))


def repeats(ids, run: int) -> bool:
    """Whether ``ids`` hold some run of at least ``run`` ids twice in a row."""
    n = len(ids)
    for k in range(run, n // 2 + 1):
        for i in range(n - 2 * k + 1):
            if ids[i] == ids[i + k] and ids[i:i + k] == ids[i + k:i + 2 * k]:
                return True
    return False


def loop_cut(ids, run: int, ends_sentence=None):
    """Where a decode that ran out of tokens inside a loop ends: if ``ids`` end in two or more
    copies of one period of at least ``run`` ids (the last copy may be cut short), the length up
    to the end of the first copy, moved back to the last id in that copy for which
    ``ends_sentence(id)`` holds, if any; else None. A short context makes Whisper read the speech
    again and again ("Yes, please. Yes, please. Yes,"): the first reading is the transcript. (The
    period is found from its first differing id: "turn on ... kitchen. Turn on ... kitchen. Turn"
    repeats " on ... kitchen. Turn", whose sentence end puts the cut after "kitchen.".)"""
    n = len(ids)
    for start in range(n):
        for k in range(run, (n - start) // 2 + 1):
            if all(ids[i] == ids[i - k] for i in range(start + k, n)):
                if ends_sentence is not None:
                    for end in range(start + k, start, -1):
                        if ends_sentence(ids[end - 1]):
                            return end
                return start + k
    return None


def whole_repeat(ids, run: int):
    """If ``ids`` are two or more copies of one period of at least ``run`` ids (the whole text
    said again: "Yes, please. Yes, please."), the period's length; else None."""
    n = len(ids)
    for k in range(run, n // 2 + 1):
        if n % k == 0 and all(ids[i] == ids[i - k] for i in range(k, n)):
            return k
    return None


def first_reading(audio, ids, finish_reason: str, max_new_tokens, budgeted, ends_sentence=None):
    """With ``on_loop: "cut"``, where a short-context decode that read the speech again ends: one
    that ran to its budget inside a loop (``loop_cut``), or one that stopped after saying its
    whole text two or more times (``whole_repeat``). None for any other decode (``looped`` then
    judges it)."""
    ctx = audio.context
    if (ctx is None or ctx.encode == "window" or ctx.on_loop != "cut" or not ctx.fallback_repeat_tokens):
        return None
    if finish_reason == "stop":
        return whole_repeat(ids, ctx.fallback_repeat_tokens)
    if not _budget_ended(finish_reason, max_new_tokens, budgeted):
        return None
    return loop_cut(ids, ctx.fallback_repeat_tokens, ends_sentence)


def looped(audio, ids, text: str, finish_reason: str, max_new_tokens, budgeted=None) -> bool:
    """Whether a window decoded on a short context should be decoded again over the whole window:
    its text looks like a loop, or it ran out of tokens that were not the caller's cap
    (``budgeted``: the cap it was decoded with, from ``budget``)."""
    ctx = audio.context
    if ctx is None or ctx.encode == "window" or finish_reason == "cancelled":
        return False
    if (finish_reason == "length" and max_new_tokens is None) or _budget_ended(finish_reason, max_new_tokens, budgeted):
        return True   # ran to max_length or to the budget, not to the caller's cap
    if ctx.fallback_repeat_tokens and repeats(ids, ctx.fallback_repeat_tokens):
        return True
    if ctx.fallback_compression_ratio == 0:
        return False
    raw = text.encode("utf-8")
    return bool(raw) and len(raw) / len(zlib.compress(raw)) > ctx.fallback_compression_ratio
