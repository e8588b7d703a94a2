"""The public API: ``load`` a bundle, then ``generate`` / ``stream`` / ``chat``.

Layers (mlx-lm style): ``loops.token_steps`` yields ids -> ``stream`` yields events with text
deltas and a ``finish_reason`` -> ``generate`` collects the whole result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator

from .config.load import load_config
from .engine import controls as control_values
from .engine.build import assemble, structure
from .errors import InputError
from .loops import LOOPS, Timing
from .search import options as search_options
from .search.detokenize import IncrementalDetokenizer
from .search.sampler import Sampler
from .search.stopping import StopStrings, stop_ids
from .speech import SpeechResult, synthesize


@dataclass
class StreamEvent:
    text: str                      # new text since the previous event (never broken UTF-8)
    token_ids: list[int]           # ids generated since the previous event
    finish_reason: str | None = None   # "stop" | "length" on the last event


@dataclass
class GenerationResult:
    tokens: list[int]              # new token ids only (a final stop id included)
    text: str
    finish_reason: str | None
    prompt_tokens: int = 0
    cached_tokens: int = 0         # prompt tokens the state already held (chat continuation)
    prefill_ms: float = 0.0
    decode_tokens_per_s: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "text": self.text, "finish_reason": self.finish_reason,
                "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "prefill_ms": round(self.prefill_ms, 3),
                "decode_tokens_per_s": round(self.decode_tokens_per_s, 3)}


def _default_backend():
    from .backends.native import NativeBackend

    return NativeBackend()


@dataclass
class RunResult:
    """What a single-pass run made: engine tensors by pipeline output name."""

    outputs: dict
    compute_seconds: float
    backend: object = field(repr=False, default=None)

    def read(self, name: str = "output") -> tuple[list, tuple[int, ...]]:
        """(flat values, shape) of one output, copied out of the engine."""
        if name not in self.outputs:
            raise InputError(f'no output "{name}"; this pipeline made {", ".join(self.outputs) or "none"}')
        tensor = self.outputs[name]
        return self.backend.to_list(tensor), self.backend.shape(tensor)


def _native_text(bundle_dir, spec):
    from .text import load_text_processor

    return load_text_processor(bundle_dir, spec)


def _native_phonemizer(bundle_dir, spec):
    from .phonemes import load_phonemizer

    return load_phonemizer(bundle_dir, spec)


def load(path, providers=None, backend=None, text=True, text_loader=None, variant=None) -> "Pipeline":
    """Open a bundle; ``variant`` (an execution provider name) forces that provider's files."""
    config = load_config(path)
    return Pipeline(config, backend or _default_backend(), providers, text, text_loader, variant)


class Pipeline:
    """A loaded bundle: sessions open, state empty, ready to generate."""

    def __init__(self, config, backend, providers=None, text=True, text_loader=None, variant=None,
                 phonemizer_loader=None):
        self.config = config
        self.spec = config.spec
        self.backend = backend
        assembly = assemble(config, backend, providers, variant)
        self.sessions = assembly.sessions
        self.executor = assembly.executor
        self.warnings = assembly.warnings
        self.structure = structure(self.spec)
        self.defaults = search_options.defaults_from(self.spec.generation)
        self.history: list[int] = []     # ids the state holds (a chat continues from here)
        self.text = self._load_text(text_loader or _native_text) if text else None
        phonemes = self.spec.preprocessing.phonemes
        self.phonemizer = ((phonemizer_loader or _native_phonemizer)(self.config.bundle_dir, phonemes)
                           if phonemes is not None else None)
        self.controls = control_values.controls(self.spec.pipeline.inputs)

    def _load_text(self, loader):
        spec = self.spec.preprocessing.text
        try:
            return loader(self.config.bundle_dir, spec)
        except Exception:
            if spec is not None:
                raise
            return None   # no tokenizer declared or found: ids in, ids out

    # ---- helpers ---------------------------------------------------------------------------

    def _logits_info(self):
        session, name = self.executor.plan.pipeline_outputs["logits"]
        return self.sessions[session].outputs[name], self.sessions[session].provider

    def _eos(self) -> tuple[int, ...]:
        eos = tuple(self.spec.tokens.eos)
        if not eos and self.text is not None:
            eos = tuple(getattr(self.text, "eos_token_ids", ()) or ())
        return eos

    def _prompt_ids(self, prompt, input_ids) -> list[int]:
        if (prompt is None) == (input_ids is None):
            raise InputError("give exactly one of prompt= (text) or input_ids= (token ids)")
        if input_ids is not None:
            if isinstance(input_ids, (str, bytes)) or not all(
                    isinstance(i, int) and not isinstance(i, bool) for i in input_ids):
                raise InputError(f"input_ids: expected a list of integers, found {input_ids!r:.80}")
            ids = list(input_ids)
        else:
            if not isinstance(prompt, str):
                raise InputError(f"prompt: expected a string, found {type(prompt).__name__}")
            ids = self._tokenizer().encode(prompt, add_special_tokens=True) if prompt else []
        if not ids:
            raise InputError("empty prompt: nothing to generate from")
        vocab = self._vocab_size()
        bad = [i for i in ids if not 0 <= i < vocab] if vocab else []
        if bad:
            raise InputError(f"input_ids: {bad[:5]} outside the vocabulary (0..{vocab - 1})")
        return ids

    def _vocab_size(self) -> int | None:
        if "logits" not in self.executor.plan.pipeline_outputs:
            return None
        dim = self._logits_info()[0].shape[-1]
        return dim if isinstance(dim, int) else None

    def _options(self, search: dict, max_new_tokens):
        if max_new_tokens is not None:
            search = dict(search, max_new_tokens=max_new_tokens)
        return search_options.resolve(self.defaults, search)

    def _tokenizer(self):
        if self.text is None:
            raise InputError(f"this bundle has no tokenizer ({self.config.bundle_dir}); pass input_ids=")
        return self.text

    def _check_length(self, total: int, opts) -> None:
        if total >= opts.max_length:
            raise InputError(f"prompt is {total} tokens but the context holds {opts.max_length} "
                             f"(generation.max_length); shorten it or start a new chat")

    @property
    def final_outputs(self) -> dict:
        """Engine tensors the final phase produced in the last generation (name -> tensor)."""
        return self.executor.final_outputs

    def reset(self) -> None:
        """Forget the conversation: empty state."""
        self.executor.reset()
        self.history = []

    # ---- generation --------------------------------------------------------------------------

    def stream(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None,
               **search) -> Iterator[StreamEvent]:
        """Generate from a fresh state, yielding text deltas as they become complete.

        ``inputs`` gives other pipeline inputs (e.g. pixel values): name -> (flat values, shape).
        """
        self._require_autoregressive()
        ids = self._prompt_ids(prompt, input_ids)
        opts = self._options(search, max_new_tokens)
        self._check_length(len(ids), opts)
        self.reset()
        return self._stream(ids, opts, Timing(), self._extra_inputs(inputs))

    def _extra_inputs(self, inputs, controls=None, provided=()) -> dict:
        extra = control_values.resolve(self.spec.pipeline.inputs, controls or {})
        for name, value in (inputs or {}).items():
            if hasattr(value, "shape") and hasattr(value, "tolist"):   # an array
                value = (value.reshape(-1).tolist(), tuple(value.shape))
            if not (isinstance(value, tuple) and len(value) == 2):
                raise InputError(f'inputs["{name}"]: expected (flat values, shape) or an array')
            values, shape = value
            count = 1
            for d in shape:
                count *= d
            if count != len(values):
                raise InputError(f'inputs["{name}"]: {len(values)} values do not fill shape {tuple(shape)}')
            if name not in self.executor.plan.pipeline_inputs:
                raise InputError(f'inputs["{name}"]: not a pipeline input of this bundle; it takes '
                                 f"{', '.join(sorted(self.executor.plan.pipeline_inputs))}")
            extra[name] = (list(values), tuple(shape))
        missing = sorted(self.executor.plan.caller_inputs - set(extra) - set(provided))
        if missing:
            raise InputError(f"this pipeline needs input(s) {', '.join(missing)}: pass "
                             f'inputs={{"{missing[0]}": (values, shape)}}')
        return extra

    def _require_autoregressive(self) -> None:
        if self.spec.generation.loop != "autoregressive":
            raise InputError(f'this bundle\'s loop is "{self.spec.generation.loop}": use run(inputs=...); '
                             f'generate() and chat() need "autoregressive"')

    def _stream(self, new_ids: list[int], opts, timing: Timing, extra=None) -> Iterator[StreamEvent]:
        info, provider = self._logits_info()
        sampler = Sampler(self.backend, provider, opts, info)
        steps = LOOPS["autoregressive"](self.executor, sampler, self.history, new_ids, opts,
                                        stop_ids(opts, self._eos()), timing, extra)
        detok = None
        if self.text is not None:
            special = frozenset(self._eos()) | frozenset(self.text.special_token_ids)
            detok = IncrementalDetokenizer(self.text.decode, skip_special_tokens_ids=special,
                                           hold_ids=frozenset(getattr(self.text, "byte_fallback_ids", ())))
        stops = StopStrings(opts.stop_strings if detok else ())
        pending: list[int] = []
        for token, finish in steps:
            pending.append(token)
            delta = detok.push(token) if detok else ""
            if finish and detok:
                delta += detok.flush()
            text, hit = stops.push(delta)
            if hit:
                finish = "stop"
            if finish:
                text += stops.flush() if not hit else ""
                yield StreamEvent(text, pending, finish)
                steps.close()
                return
            if text or pending:
                yield StreamEvent(text, pending)
                pending = []

    def generate(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None,
                 on_event=None, cancel=None, **search) -> GenerationResult:
        """The whole result of ``stream``: new token ids, text, finish reason and timings.

        ``on_event`` sees every StreamEvent as it happens; ``cancel()`` returning True stops
        the generation before the next step (finish_reason "cancelled").
        """
        self._require_autoregressive()
        ids = self._prompt_ids(prompt, input_ids)
        opts = self._options(search, max_new_tokens)
        self._check_length(len(ids), opts)
        extra = self._extra_inputs(inputs)
        self.reset()
        return self._collect(ids, len(ids), opts, extra, on_event, cancel)

    def _collect(self, new_ids, prompt_len, opts, extra=None, on_event=None, cancel=None) -> GenerationResult:
        timing = Timing()
        tokens, parts, finish = [], [], None
        events = self._stream(new_ids, opts, timing, extra)
        for event in events:
            tokens.extend(event.token_ids)
            parts.append(event.text)
            finish = event.finish_reason
            if on_event is not None:
                on_event(event)
            if finish is None and cancel is not None and cancel():
                events.close()
                finish = "cancelled"
                break
        return GenerationResult(tokens, "".join(parts), finish, prompt_len, prompt_len - len(new_ids),
                                timing.prefill_ms, timing.decode_tokens_per_s, list(self.warnings))

    # ---- single pass -------------------------------------------------------------------------

    def run(self, inputs=None, **controls) -> RunResult:
        """Run a ``single_pass`` pipeline once on ``inputs`` (name -> (flat values, shape) or an
        array) and ``controls`` (pipeline.inputs by name); the result holds every pipeline
        output as an engine tensor."""
        if self.spec.generation.loop != "single_pass":
            raise InputError(f'this bundle\'s loop is "{self.spec.generation.loop}": use generate() or chat()')
        extra = self._extra_inputs(inputs, controls)
        self.reset()
        outputs, seconds = LOOPS["single_pass"](self.executor, extra)
        return RunResult(outputs, seconds, self.backend)

    # ---- speech ------------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """"speech" when pipeline.output is a waveform (use speak), else "text"."""
        out = self.spec.pipeline.output
        return "speech" if out is not None and out.audio is not None else "text"

    def speak(self, text: str, inputs=None, on_audio=None, cancel=None, **controls) -> SpeechResult:
        """Text to a waveform, sentence by sentence.

        ``controls`` set pipeline.inputs by name (e.g. ``noise_scale=0``); ``inputs`` gives
        other pipeline inputs as (flat values, shape); ``on_audio(samples, sentence)`` sees
        each sentence as it is made; ``cancel()`` returning True stops before the next one.
        """
        if self.kind != "speech":
            raise InputError('this bundle makes no audio: pipeline.output has no "audio" section '
                             f"({self.config.file}); use generate() or run()")
        extra = self._extra_inputs(inputs, controls, provided=synthesize.FRONT_END_INPUTS)
        return synthesize.speak(self, text, extra, on_audio, cancel)

    def warm_up(self) -> float:
        """Run a speech bundle's front end and single-pass flow once on a short word, so the
        first real sentence doesn't pay one-time start-up (engine allocations, the browser's
        phonemizer download); returns the seconds it took. Autoregressive voices only warm
        their front end."""
        if self.kind != "speech":
            return 0.0
        start = time.perf_counter()
        if self.spec.generation.loop == "single_pass":
            self.speak("Hello.")
        else:
            synthesize.sentence_inputs(self, "Hello.")
        self.reset()
        return time.perf_counter() - start

    # ---- chat --------------------------------------------------------------------------------

    def chat_prompt_ids(self, messages: list[dict]) -> list[int]:
        text = self._tokenizer()
        if not messages:
            raise InputError("chat: messages is empty")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise InputError(f"chat: messages[{i}] must be an object with role and content")
        prompt = text.apply_chat_template(messages, add_generation_prompt=True)
        return text.encode(prompt, add_special_tokens=False)

    def chat_stream(self, messages: list[dict], max_new_tokens=None, **search) -> Iterator[StreamEvent]:
        """Continue the conversation: only tokens the state hasn't seen are run."""
        self._require_autoregressive()
        ids = self.chat_prompt_ids(messages)
        opts = self._options(search, max_new_tokens)
        self._check_length(len(ids), opts)
        new_ids = self._continue_from(ids)
        return self._stream(new_ids, opts, Timing())

    def chat(self, messages: list[dict], max_new_tokens=None, on_event=None, cancel=None,
             **search) -> GenerationResult:
        """Continue the conversation (see ``chat_stream``) and return the whole reply."""
        self._require_autoregressive()
        ids = self.chat_prompt_ids(messages)
        opts = self._options(search, max_new_tokens)
        self._check_length(len(ids), opts)
        new_ids = self._continue_from(ids)
        return self._collect(new_ids, len(ids), opts, None, on_event, cancel)

    def _continue_from(self, ids: list[int]) -> list[int]:
        """Rewind the state to the longest prefix it shares with ``ids``; return the rest."""
        keep = 0
        for a, b in zip(self.history, ids):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(ids) - 1)   # always run at least one token
        # a plugin that lengthened the sequence (e.g. prepended audio frames) leaves positions
        # the history doesn't count: start over rather than cut at the wrong place
        aligned = self.executor.length == len(self.history)
        if keep == 0 or not aligned or not self.executor.rewind(keep):
            self.reset()
            return ids
        del self.history[keep:]
        return ids[keep:]
