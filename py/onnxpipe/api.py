"""The public API: ``load`` a bundle, then ``generate`` / ``stream`` / ``chat`` / ``run`` / ``speak``.

``Pipeline`` is a facade over the jobs in ``onnxpipe.pipeline`` (one object each): the loaded
bundle, text generation, the conversation that continues its state, single-pass runs; speech
(``onnxpipe.speech``) builds on their public surface.
"""

from __future__ import annotations

import time
from typing import Iterator

from .config.load import load_config
from .config.ranges import check_ranges
from .errors import InputError
from .pipeline import (Conversation, GenerationResult, LoadedPipeline, OnePass, RunResult,
                       SpeechDetector, StreamEvent, TextGeneration, Transcription,
                       TranscriptionResult, VoiceActivity, VoiceActivityResult)
from .speech import SpeechResult, synthesize

__all__ = ["GenerationResult", "Pipeline", "RunResult", "SpeechDetector", "StreamEvent", "TranscriptionResult", "VoiceActivityResult", "load"]


def _default_backend():
    from .backends.native import NativeBackend

    return NativeBackend()


def load(path, providers=None, backend=None, text=True, text_loader=None, variant=None,
         dtype=None) -> "Pipeline":
    """Open a bundle; ``variant`` (an execution provider name) forces that provider's files;
    ``dtype`` picks a precision a transformers.js folder offers (fp32, fp16, q8, q4, q4f16...)."""
    config = load_config(path, dtype=dtype)
    return Pipeline(config, backend or _default_backend(), providers, text, text_loader, variant)


class Pipeline:
    """A loaded bundle: sessions open, state empty, ready to generate, run or speak."""

    def __init__(self, config, backend, providers=None, text=True, text_loader=None, variant=None,
                 phonemizer_loader=None):
        with config.errors_told():   # a genai bundle's errors name genai_config.json's keys
            self.loaded = LoadedPipeline(config, backend, providers, text, text_loader, variant,
                                         phonemizer_loader)
            check_ranges(config.spec, config.file)   # after the stages' own checks, whose messages say more
        self.generation = TextGeneration(self.loaded)
        self.conversation = Conversation(self.generation)
        self.one_pass = OnePass(self.loaded)
        self.voice_activity = VoiceActivity(self.loaded)
        self.transcription = Transcription(self.loaded, self.generation)

    # ---- what is loaded ------------------------------------------------------------------------

    config = property(lambda self: self.loaded.config)
    spec = property(lambda self: self.loaded.spec)
    backend = property(lambda self: self.loaded.backend)
    sessions = property(lambda self: self.loaded.sessions)
    executor = property(lambda self: self.loaded.executor)
    warnings = property(lambda self: self.loaded.warnings)
    structure = property(lambda self: self.loaded.structure)
    defaults = property(lambda self: self.loaded.defaults)
    text = property(lambda self: self.loaded.text)
    phonemizer = property(lambda self: self.loaded.phonemizer)
    controls = property(lambda self: self.loaded.controls)
    kind = property(lambda self: self.loaded.kind,
                    doc='"speech" when pipeline.output is a waveform (use speak), "voice-activity" for '
                        'a streaming speech detector (use detect_speech), "transcription" for a token '
                        'loop fed a waveform (use transcribe), else "text"')

    @property
    def history(self) -> list[int]:
        """Ids the state holds (a chat continues from here)."""
        return self.generation.history

    @property
    def final_outputs(self) -> dict:
        """Engine tensors the final phase produced in the last generation (name -> tensor)."""
        return self.generation.final_outputs

    def reset(self) -> None:
        """Forget the conversation: empty state."""
        self.generation.reset()

    # ---- jobs ----------------------------------------------------------------------------------

    def stream(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None, images=None,
               **search) -> Iterator[StreamEvent]:
        """Generate from a fresh state, yielding text deltas (see TextGeneration.stream);
        ``images``: onnxpipe.image.Image list for a vision-language bundle; ``logit_mask=f``
        (keyword): ``f(generated_ids)`` returns ids the next token may not be (also for
        generate, chat and chat_stream)."""
        return self.generation.stream(prompt, input_ids, max_new_tokens, inputs, images, **search)

    def generate(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None,
                 on_event=None, cancel=None, images=None, **search) -> GenerationResult:
        """The whole result of ``stream`` (see TextGeneration.generate)."""
        return self.generation.generate(prompt, input_ids, max_new_tokens, inputs, on_event,
                                        cancel, images, **search)

    def chat_prompt_ids(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        return self.conversation.prompt_ids(messages, tools)

    def chat_stream(self, messages: list[dict], max_new_tokens=None, response_format=None, tools=None,
                    tool_choice=None, **search) -> Iterator[StreamEvent]:
        """Continue the conversation: only tokens the state hasn't seen are run. ``tools`` (OpenAI
        function tools) and ``tool_choice`` ("auto", "none", "required" or a named function): the
        last event carries the reply's tool_calls (see Conversation.stream)."""
        return self.conversation.stream(messages, max_new_tokens, response_format=response_format,
                                        tools=tools, tool_choice=tool_choice, **search)

    def chat(self, messages: list[dict], max_new_tokens=None, on_event=None, cancel=None,
             response_format=None, tools=None, tool_choice=None, **search) -> GenerationResult:
        """Continue the conversation and return the whole reply (``tool_calls`` when it calls tools)."""
        return self.conversation.chat(messages, max_new_tokens, on_event, cancel, response_format=response_format,
                                      tools=tools, tool_choice=tool_choice, **search)

    def run(self, inputs=None, **controls) -> RunResult:
        """Run a single-pass pipeline once on ``inputs`` (name -> (flat values, shape) or an
        array) and ``controls`` (pipeline.inputs by name); every pipeline output comes back
        as an engine tensor."""
        return self.one_pass.run(inputs, **controls)

    def speak(self, text: str, inputs=None, on_audio=None, cancel=None, **controls) -> SpeechResult:
        """Text to a waveform, sentence by sentence.

        ``controls`` set pipeline.inputs by name (e.g. ``noise_scale=0``); ``inputs`` gives
        other pipeline inputs as (flat values, shape); ``on_audio(samples, sentence)`` sees
        each sentence as it is made; ``cancel()`` returning True stops before the next one.
        """
        if self.kind != "speech":
            raise InputError('this bundle makes no audio: pipeline.output has no "audio" section '
                             f"({self.config.file}); use generate() or run()")
        extra = self.loaded.inputs(inputs, controls, provided=synthesize.FRONT_END_INPUTS)
        return synthesize.speak(self, text, extra, on_audio, cancel)

    def detect_speech(self, samples, sample_rate: int, **controls) -> VoiceActivityResult:
        """Speech segments of a whole recording: ``samples`` (floats in [-1, 1], mono) at
        ``sample_rate``; ``controls`` set pipeline.inputs by name (e.g. threshold=0.6)."""
        return self.voice_activity.detect(samples, sample_rate, **controls)

    def transcribe(self, samples, sample_rate: int, on_text=None, cancel=None, max_new_tokens=None,
                   **search) -> TranscriptionResult:
        """Text of mono ``samples`` (floats in [-1, 1]) at any ``sample_rate``: resampled to the
        bundle's rate, cut into windows at quiet points, each decoded from the bundle's
        decoder prefix. ``on_text(window)`` sees each window's text as it is done; ``cancel()``
        returning True stops before the next token."""
        return self.transcription.transcribe(samples, sample_rate, on_text, cancel, max_new_tokens, **search)

    def speech_detector(self, pause_ms: float | None = None, **controls) -> SpeechDetector:
        """A live speech detector: ``push(samples)`` returns speech_start / speech_end events as
        they are decided (and, with ``pause_ms``, a speech_pause once a silence has lasted that
        long, with the bounds its end will have), ``finish()`` ends the stream. One stream per
        bundle at a time."""
        return self.voice_activity.detector(pause_ms, **controls)

    def warm_up(self) -> float:
        """Run a speech bundle's front end and flow once on a short word (and, for a fast voice,
        on a sentence: speech/synthesize.py WARM_UP_TEXT), so the first real sentence doesn't pay
        one-time start-up (engine allocations, the browser's phonemizer download); returns the
        seconds it took. Token-loop voices only warm their front end;
        a voice-activity bundle runs one chunk of silence (the first live chunk is then fast)."""
        if self.kind == "voice-activity":
            start = time.perf_counter()
            streaming = self.spec.generation.streaming
            self.detect_speech([0.0] * streaming.chunk_size, streaming.sample_rate)
            self.voice_activity.current = None
            self.reset()
            return time.perf_counter() - start
        if self.kind != "speech":
            return 0.0
        start = time.perf_counter()
        synthesize.sentence_inputs(self, "Hello.")   # the front end first: the browser's phonemizer loads now
        if not self.loaded.loop.makes_tokens:
            rtf = self.speak("Hello.").real_time_factor   # a cold run: slower than the voice goes
            if rtf >= 1.0:
                rtf = self.speak("Hello.").real_time_factor
            if rtf >= synthesize.WARM_UP_LONG_MIN_RTF:
                self.speak(synthesize.WARM_UP_TEXT)   # a fast voice: grow its buffers to a first piece's size
        self.reset()
        return time.perf_counter() - start
