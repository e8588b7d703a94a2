"""Speech pipelines: text in, waveform out (see synthesize.py)."""

from .result import SentenceAudio, SpeechResult
from .synthesize import speak

__all__ = ["SentenceAudio", "SpeechResult", "speak"]
