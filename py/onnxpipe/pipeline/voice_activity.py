"""Voice activity: speech segments of audio, from a streaming-loop bundle (``kind`` voice-activity).

``SpeechDetector`` is the live form: ``push`` samples as they come (any length) and get the
events they decided (``speech_start``, ``speech_end``, and with ``pause_ms`` ``speech_pause``); the recurrent state and the partial
chunk wait between calls. ``VoiceActivity.detect`` is the whole-file form: one detector fed
everything, then finished. Both are the same loop and segmenter, so they agree exactly.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from ..audio.rates import check_sample_rate
from ..errors import InputError
from ..loops.streaming import Streaming, as_float32
from ..ops.resample import resample_graph
from ..speech.segments import Segmenter, SpeechEvent, settings_from


@dataclass
class VoiceActivityResult:
    segments: list[tuple[float, float]]     # (start, end) seconds, padded
    probabilities: array                    # one per chunk, in order
    events: list[SpeechEvent]
    sample_rate: int
    chunk_size: int
    samples: int                            # audio samples taken in
    compute_seconds: float

    @property
    def audio_seconds(self) -> float:
        return self.samples / self.sample_rate

    def to_dict(self, probabilities: bool = False) -> dict:
        out = {"segments": [[round(a, 6), round(b, 6)] for a, b in self.segments],
               "audio_seconds": round(self.audio_seconds, 6),
               "compute_seconds": round(self.compute_seconds, 6),
               "sample_rate": self.sample_rate, "chunk_size": self.chunk_size,
               "chunks": len(self.probabilities)}
        if probabilities:
            out["probabilities"] = [round(p, 7) for p in self.probabilities]
        return out


class SpeechDetector:
    """Live voice activity: ``push(samples)`` -> events; ``finish()`` at the end of the stream."""

    def __init__(self, job: "VoiceActivity", controls: dict, pause_ms: float | None = None):
        loaded = job.loaded
        spec = loaded.spec
        values = loaded.inputs(None, controls)
        self.job = job
        self.streaming = spec.generation.streaming
        self.loop = Streaming(loaded.executor, self.streaming, values)
        self.segmenter = Segmenter(settings_from(spec.pipeline.output.segments, values),
                                   self.streaming.chunk_size, self.streaming.sample_rate, pause_ms)
        self.probabilities = array("f")
        self.events: list[SpeechEvent] = []
        self.finished = False
        self.loop.start()

    @property
    def sample_rate(self) -> int:
        return self.streaming.sample_rate

    def push(self, samples) -> list[SpeechEvent]:
        """Take ``samples`` (at ``sample_rate``; any length); the events they decided."""
        self._check()
        events = []
        for p in self.loop.feed(as_float32(samples)):
            self.probabilities.append(p)
            events.extend(self.segmenter.add(p))
        self.events.extend(events)
        return events

    def finish(self) -> list[SpeechEvent]:
        """End of the stream: the last partial chunk (zero-padded) runs, open speech ends."""
        self._check()
        pending = len(self.loop.pending)
        events = []
        for p in self.loop.finish():
            self.probabilities.append(p)
            events.extend(self.segmenter.add(p, real=pending))
        events.extend(self.segmenter.finish(self.loop.samples))
        self.events.extend(events)
        self.finished = True
        self.loop.close()
        return events

    def result(self) -> VoiceActivityResult:
        return VoiceActivityResult(list(self.segmenter.segments), self.probabilities, list(self.events),
                                   self.sample_rate, self.streaming.chunk_size, self.loop.samples,
                                   self.loop.seconds)

    def _check(self) -> None:
        if self.finished:
            raise InputError("this speech detector has finished: start a new one")
        if self.job.current is not self:
            raise InputError("another speech detector (or detect_speech) has used this bundle since this "
                             "one started: its state is gone; start a new one")


@dataclass
class VoiceActivity:
    loaded: object
    current: SpeechDetector | None = field(default=None, repr=False)

    def detector(self, pause_ms: float | None = None, **controls) -> SpeechDetector:
        """A live detector; ``controls`` set pipeline.inputs by name (e.g. threshold=0.6);
        ``pause_ms`` also reports speech_pause events (speech/segments.py).
        One bundle runs one stream at a time: a new detector ends the previous one."""
        self._require()
        self.current = None
        detector = SpeechDetector(self, controls, pause_ms)
        self.current = detector
        return detector

    def detect(self, samples, sample_rate: int, **controls) -> VoiceActivityResult:
        """Speech segments of a whole recording (``samples`` at ``sample_rate``; another rate
        than the bundle's is resampled first, by the engine). Times are of the recording."""
        self._require()
        check_sample_rate(sample_rate)
        detector = self.detector(**controls)
        samples = as_float32(samples)
        if sample_rate != detector.sample_rate and len(samples):   # nothing to resample in no audio
            samples = self._resample(samples, sample_rate, detector.sample_rate)
        detector.push(samples)
        detector.finish()
        return detector.result()

    def _resample(self, samples: array, rate: int, to: int) -> array:
        b = self.loaded.backend
        provider = next(iter(self.loaded.sessions.values())).provider
        graph = b.open_graph(resample_graph(rate, to), provider)
        x = b.tensor(samples, "float32", (1, len(samples)))
        out = b.run(graph, {"x": x}, ["y"])
        resampled = b.to_float32(out["y"])
        b.dispose_many([x, out["y"]])
        return resampled

    def _require(self) -> None:
        if self.loaded.kind != "voice-activity":
            raise InputError(f'this bundle is not a voice activity detector (its kind is "{self.loaded.kind}"; '
                             f'that needs generation.loop "streaming"): {self.loaded.config.file}')
