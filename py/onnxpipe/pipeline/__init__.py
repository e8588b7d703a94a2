"""A loaded bundle, split by job: ``LoadedPipeline`` (sessions, state, inputs, options),
``TextGeneration`` (tokens and text), ``Conversation`` (chat that continues its state),
``OnePass`` (single-pass runs). ``api.Pipeline`` puts them behind one facade; speech builds
on the same public surface."""

from .conversation import Conversation
from .loaded import LoadedPipeline
from .one_pass import OnePass, RunResult
from .text_generation import GenerationResult, StreamEvent, TextGeneration
from .transcription import Transcription
from .transcription_result import TranscriptionResult, WindowText
from .voice_activity import SpeechDetector, VoiceActivity, VoiceActivityResult

__all__ = ["Conversation", "GenerationResult", "LoadedPipeline", "OnePass", "RunResult",
           "SpeechDetector", "StreamEvent", "TextGeneration", "Transcription", "TranscriptionResult", "WindowText", "VoiceActivity", "VoiceActivityResult"]
