"""Speech segments from per-chunk speech probabilities: a small causal state machine.

It sees one probability per chunk, in order, and decides as it goes, so a live microphone fed
piece by piece and a whole file give the same segments and events. The rules:

- a chunk at or above ``threshold`` starts speech, at the chunk's first sample;
- in speech, a chunk below ``negative_threshold`` starts a silence, and only a chunk at or
  above ``threshold`` ends it; a silence that lasts ``min_silence_ms`` ends the segment where
  the silence began;
- speech shorter than ``min_speech_ms`` is dropped; ``speech_start`` is reported as soon as
  the speech has lasted that long (so it is never taken back);
- each segment is widened by ``speech_pad_ms``: before its start (never before 0 or the
  previous segment's end) and after its end (never past the audio seen when the end was
  decided: nothing depends on audio that has not arrived yet);
- with ``pause_ms`` (a live listener's choice, from ``speech_pad_ms`` up to below
  ``min_silence_ms``), a silence in reported speech that has lasted that long is reported once
  as ``speech_pause``, with the bounds its ``speech_end`` will have if the speech does not
  resume: a voice app can start on the utterance before its end is decided.

Times are in seconds from the first sample. Pure Python: it runs in Pyodide too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..config.registry import register_check
from ..errors import InputError

SETTINGS = ("threshold", "negative_threshold", "min_silence_ms", "speech_pad_ms", "min_speech_ms")


@dataclass(frozen=True)
class SegmentSettings:
    threshold: float
    negative_threshold: float
    min_silence_ms: float
    speech_pad_ms: float
    min_speech_ms: float

    def check(self, error: Callable[[str], Exception] = InputError) -> "SegmentSettings":
        """Refuse settings that contradict each other; ``error`` makes the exception."""
        if self.negative_threshold > self.threshold:
            raise error(f"negative_threshold ({self.negative_threshold}) must not be above threshold "
                        f"({self.threshold}): speech would end on chunks that also start it")
        for name in ("min_silence_ms", "speech_pad_ms", "min_speech_ms"):
            if getattr(self, name) < 0:
                raise error(f"{name} must be >= 0, found {getattr(self, name)}")
        return self


@dataclass(frozen=True)
class SpeechEvent:
    """``speech_start`` (``start``), ``speech_pause`` or ``speech_end`` (``start`` and ``end``),
    decided when ``time`` seconds of audio had been seen."""

    type: str
    start: float
    end: float | None
    time: float

    def to_dict(self) -> dict:
        out = {"type": self.type, "start": round(self.start, 6), "time": round(self.time, 6)}
        if self.end is not None:
            out["end"] = round(self.end, 6)
        return out


class Segmenter:
    """Feed ``add(probability)`` once per chunk, then ``finish(samples)``; both return the
    events they decided. ``segments`` holds every finished (start, end), in seconds."""

    def __init__(self, settings: SegmentSettings, chunk_size: int, sample_rate: int,
                 pause_ms: float | None = None):
        self.settings = settings.check()
        if pause_ms is not None and not settings.speech_pad_ms <= pause_ms < settings.min_silence_ms:
            raise InputError(f"pause_ms: expected from speech_pad_ms ({settings.speech_pad_ms:g}) up to below "
                             f"min_silence_ms ({settings.min_silence_ms:g}), so a pause's bounds are its end's; "
                             f"found {pause_ms:g}")
        self.chunk = chunk_size
        self.rate = sample_rate
        per_ms = sample_rate / 1000.0
        self.min_silence = settings.min_silence_ms * per_ms
        self.pad = settings.speech_pad_ms * per_ms
        self.min_speech = settings.min_speech_ms * per_ms
        self.pause = None if pause_ms is None else pause_ms * per_ms
        self.paused = False                   # the current silence was reported as a pause
        self.chunks = 0                       # chunks seen
        self.start: int | None = None         # first sample of the current speech (None: none)
        self.silence: int | None = None       # first sample of the silence within it
        self.padded_start: float | None = None   # set once the speech is long enough to report
        self.last_end = 0.0                   # padded end of the previous segment (samples)
        self.segments: list[tuple[float, float]] = []

    def add(self, p: float, real: int | None = None) -> list[SpeechEvent]:
        """One chunk's probability; ``real`` is how many of its samples are audio (the last,
        zero-padded chunk has fewer than chunk_size)."""
        s = self.settings
        begin = self.chunks * self.chunk
        end = begin + (self.chunk if real is None else real)
        self.chunks += 1
        if self.start is None:
            if p < s.threshold:
                return []
            self.start, self.silence, self.padded_start = begin, None, None
        elif p >= s.threshold:
            self.silence = None
        elif p < s.negative_threshold and self.silence is None:
            self.silence, self.paused = begin, False
        if self.silence is not None:
            if end - self.silence >= self.min_silence:
                return self._close(self.silence, end)
            if (self.pause is not None and not self.paused and self.padded_start is not None
                    and end - self.silence >= self.pause):
                self.paused = True   # pause >= pad: the end's min(silence + pad, seen) is fixed already
                return [SpeechEvent("speech_pause", self.padded_start / self.rate,
                                    (self.silence + self.pad) / self.rate, end / self.rate)]
            return []
        if self.padded_start is None and end - self.start >= self.min_speech:
            return [self._confirm(end)]
        return []

    def finish(self, samples: int) -> list[SpeechEvent]:
        """The audio ended after ``samples`` samples (the last chunk may have been padded)."""
        if self.start is None:
            return []
        # speech long enough was confirmed by add(), whose last chunk ended at ``samples``
        speech_end = min(self.silence if self.silence is not None else samples, samples)
        return self._close(speech_end, samples)

    def _confirm(self, seen: int) -> SpeechEvent:
        self.padded_start = max(self.start - self.pad, self.last_end, 0.0)
        return SpeechEvent("speech_start", self.padded_start / self.rate, None, seen / self.rate)

    def _close(self, speech_end: int, seen: int) -> list[SpeechEvent]:
        start, self.start, self.silence = self.padded_start, None, None
        if start is None:   # too short: dropped
            return []
        end = min(speech_end + self.pad, seen)
        self.last_end = end
        self.segments.append((start / self.rate, end / self.rate))
        return [SpeechEvent("speech_end", start / self.rate, end / self.rate, seen / self.rate)]


def settings_from(mapping, values: dict) -> SegmentSettings:
    """Settings from ``pipeline.output.segments`` (setting -> pipeline input name) and the
    resolved pipeline inputs (name -> (flat values, shape))."""
    return SegmentSettings(**{key: float(values[getattr(mapping, key)][0][0]) for key in SETTINGS}).check()


def check_declaration(spec, file: str, bundle_dir: str | None = None) -> None:
    """Load-time checks of ``pipeline.output.segments``: each setting names a scalar pipeline
    input with a default, the loop is the streaming one, and the defaults agree."""
    from ..errors import ConfigError, nearest

    out = spec.pipeline.output
    mapping = out.segments if out is not None else None
    if mapping is None:
        return
    base = "$.pipeline.output.segments"
    if spec.generation.loop != "streaming":
        raise ConfigError(f'segments are made from one probability per chunk: they need generation.loop '
                          f'"streaming", found "{spec.generation.loop}"', file=file, path=base)
    if out.audio is not None:
        raise ConfigError('an output is either audio or speech probabilities: remove "audio" or "segments"',
                          file=file, path="$.pipeline.output")
    inputs = spec.pipeline.inputs
    defaults = {}
    for key in SETTINGS:
        name = getattr(mapping, key)
        spec_in = inputs.get(name)
        if spec_in is None:
            hint = nearest(name, inputs)
            tip = f' Did you mean "{hint}"?' if hint else ""
            raise ConfigError(f'names pipeline input "{name}", which pipeline.inputs does not declare.{tip} '
                              f'Declare it, e.g. "{name}": {{"default": 0.5, "min": 0, "max": 1}}',
                              file=file, path=f"{base}.{key}")
        if spec_in.shape or spec_in.pack or isinstance(spec_in.default, (list, bool)) \
                or not isinstance(spec_in.default, (int, float)):
            raise ConfigError(f'pipeline input "{name}" must be a scalar number with a default (shape [], '
                              f'no pack), found default {spec_in.default!r}', file=file, path=f"{base}.{key}")
        defaults[key] = float(spec_in.default)
    SegmentSettings(**defaults).check(lambda msg: ConfigError(f"the defaults disagree: {msg}", file=file,
                                                              path=base))


register_check("speech_segments", check_declaration, order=70)
