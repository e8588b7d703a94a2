"""What a speech pipeline returns: the waveform, per-sentence timings, and the WAV file."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from ..audio.wav import encode_wav


@dataclass
class SentenceAudio:
    """One sentence's share of the result (what the worker sends the page as it is made)."""

    text: str
    ids: list[int]                  # what the voice was fed (phoneme ids or token ids)
    samples: int                    # sentence samples, silence after it included
    audio_seconds: float
    compute_seconds: float
    tokens: list[int] = field(default_factory=list)   # generated ids (autoregressive voices)

    def to_dict(self) -> dict:
        out = {"text": self.text, "ids": self.ids, "samples": self.samples,
               "audio_seconds": round(self.audio_seconds, 6), "compute_seconds": round(self.compute_seconds, 6)}
        if self.tokens:
            out["tokens"] = self.tokens
        return out


@dataclass
class SpeechResult:
    samples: array                  # float32 waveform of every sentence, in order
    sample_rate: int
    sentences: list[SentenceAudio]
    finish_reason: str = "done"     # "done" | "cancelled"
    warnings: list[str] = field(default_factory=list)

    @property
    def audio_seconds(self) -> float:
        return len(self.samples) / self.sample_rate

    @property
    def compute_seconds(self) -> float:
        return sum(s.compute_seconds for s in self.sentences)

    @property
    def real_time_factor(self) -> float:
        """Seconds of audio made per second of compute (above 1: faster than real time)."""
        return self.audio_seconds / self.compute_seconds if self.compute_seconds > 0 else 0.0

    def wav(self) -> bytes:
        return encode_wav(self.samples, self.sample_rate)

    def to_dict(self) -> dict:
        return {"audio_seconds": round(self.audio_seconds, 6), "compute_seconds": round(self.compute_seconds, 6),
                "sample_rate": self.sample_rate, "real_time_factor": round(self.real_time_factor, 3),
                "finish_reason": self.finish_reason, "samples": len(self.samples),
                "sentences": [s.to_dict() for s in self.sentences], "warnings": self.warnings}
