"""What a transcription returns: the text, the token ids, and per-window pieces."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WindowText:
    """One window's share (what the worker sends the page as each window is done)."""

    index: int
    start_seconds: float
    end_seconds: float
    text: str
    tokens: list[int]
    compute_seconds: float

    def to_dict(self) -> dict:
        return {"index": self.index, "start_seconds": round(self.start_seconds, 3),
                "end_seconds": round(self.end_seconds, 3), "text": self.text, "tokens": self.tokens,
                "compute_seconds": round(self.compute_seconds, 6)}


@dataclass
class TranscriptionResult:
    text: str                      # every window's text, special tokens skipped, joined by spaces
    tokens: list[int]              # generated ids of every window, in order (stop ids left out)
    audio_seconds: float
    compute_seconds: float
    windows: list[WindowText] = field(default_factory=list)
    finish_reason: str = "done"    # "done" | "cancelled"
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The four keys the CLI and the headless runner print."""
        return {"text": self.text, "tokens": self.tokens, "audio_seconds": round(self.audio_seconds, 6),
                "compute_seconds": round(self.compute_seconds, 6)}
