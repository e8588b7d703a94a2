"""Tokens and text from an autoregressive pipeline.

Layers (mlx-lm style): the ``Autoregressive`` loop yields ids -> ``stream`` yields events with
text deltas and a ``finish_reason`` -> ``generate`` collects the whole result. The state's ids
are kept in ``history`` so a conversation can continue from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..errors import InputError
from ..loops import Timing
from ..search.detokenize import IncrementalDetokenizer
from ..search.stopping import StopStrings, stop_ids

# A reply's new-token budget when a call names neither max_new_tokens nor max_length: the
# browser pages' default too. A bundle's max_length is its context (8,192 for SmolLM2), and a
# model that misses its end-of-turn token would otherwise write until the context is full.
DEFAULT_MAX_NEW_TOKENS = 256

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
    speculative: dict | None = None    # passes, drafted, accepted, acceptance_rate (when on)
    # beam search (num_beams > 1): the num_return_sequences best finished beams, best first, each
    # {"tokens", "text", "score", "finish_reason"}; score = summed log-probability / (new
    # tokens ** length_penalty), transformers' sequences_scores. tokens/text above are the first's
    sequences: list[dict] | None = None
    # beam search with tokens.pad: those sequences' tokens padded with it to the longest, as
    # transformers returns them (generate(...).sequences without the prompt)
    padded: list[list[int]] | None = None

    def to_dict(self) -> dict:
        out = {"tokens": self.tokens, "text": self.text, "finish_reason": self.finish_reason,
               "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
               "prefill_ms": round(self.prefill_ms, 3),
               "decode_tokens_per_s": round(self.decode_tokens_per_s, 3)}
        if self.speculative is not None:
            out["speculative"] = self.speculative
        if self.sequences is not None:
            out["sequences"] = self.sequences
        if self.padded is not None:
            out["padded"] = self.padded
        return out


def padded(sequences: list[dict] | None, pad: int | None) -> list[list[int]] | None:
    """The sequences' tokens, each filled up with ``pad`` to the longest (None without either)."""
    if not sequences or pad is None:
        return None
    width = max(len(s["tokens"]) for s in sequences)
    return [list(s["tokens"]) + [pad] * (width - len(s["tokens"])) for s in sequences]


class TextGeneration:
    def __init__(self, loaded):
        self.loaded = loaded
        self.history: list[int] = []     # ids the state holds (a chat continues from here)
        self.final_outputs: dict = {}    # what the final flow made in the last generation
        self.sequences: list[dict] | None = None   # beam search's returned beams, last generation

    def reset(self) -> None:
        """Forget the conversation: empty state."""
        self.loaded.reset()
        self.history = []
        self.final_outputs = {}

    # ---- checks --------------------------------------------------------------------------------

    def prompt_ids(self, prompt, input_ids) -> list[int]:
        start = self.loaded.start_ids
        if prompt is None and input_ids is None and start:
            return list(start)   # the bundle's own start (checked against the vocabulary at load)
        if (prompt is None) == (input_ids is None):
            raise InputError("give exactly one of prompt= (text) or input_ids= (token ids)")
        if input_ids is not None:
            if not isinstance(input_ids, (list, tuple, range)) or not all(
                    isinstance(i, int) and not isinstance(i, bool) for i in input_ids):
                raise InputError(f"input_ids: expected a list of integers, found {input_ids!r:.80}")
            ids = list(input_ids)
        else:
            if not isinstance(prompt, str):
                raise InputError(f"prompt: expected a string, found {type(prompt).__name__}")
            _check_unicode("prompt", prompt)
            ids = self.loaded.tokenizer().encode(prompt, add_special_tokens=True) if prompt else []
        if not ids:
            raise InputError("empty prompt: nothing to generate from")
        vocab = self.loaded.vocab_size
        bad = [i for i in ids if not 0 <= i < vocab] if vocab else []
        if bad:
            raise InputError(f"input_ids: {bad[:5]} outside the vocabulary (0..{vocab - 1})")
        return ids

    @staticmethod
    def check_length(total: int, opts) -> None:
        if total >= opts.max_length:
            raise InputError(f"prompt is {total} tokens but the context holds {opts.max_length} "
                             f"(generation.max_length); shorten it or start a new chat")

    def _prepare(self, prompt, input_ids, max_new_tokens, search, images=None):
        """(prompt ids, options, the images' pipeline inputs)."""
        self.loaded.require_loop(True, "run(inputs=...); generate() and chat() need a token loop")
        ids, pictures = self.loaded.with_images(self.prompt_ids(prompt, input_ids), images)
        opts = self.loaded.options(search, max_new_tokens, DEFAULT_MAX_NEW_TOKENS)
        self.check_length(len(ids), opts)
        return ids, opts, pictures

    # ---- generation ----------------------------------------------------------------------------

    def stream(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None, images=None,
               **search) -> Iterator[StreamEvent]:
        """Generate from a fresh state, yielding text deltas as they become complete.

        ``inputs`` gives other pipeline inputs (e.g. pixel values): name -> (flat values, shape);
        ``images`` (onnxpipe.image.Image) go through the bundle's image preprocessing.
        """
        ids, opts, pictures = self._prepare(prompt, input_ids, max_new_tokens, search, images)
        self.reset()
        return self.continue_stream(ids, opts, Timing(), {**self.loaded.inputs(inputs), **pictures})

    def generate(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None,
                 on_event=None, cancel=None, images=None, **search) -> GenerationResult:
        """The whole result of ``stream``: new token ids, text, finish reason and timings.

        ``on_event`` sees every StreamEvent as it happens; ``cancel()`` returning True stops
        the generation before the next step (finish_reason "cancelled").
        """
        ids, opts, pictures = self._prepare(prompt, input_ids, max_new_tokens, search, images)
        extra = {**self.loaded.inputs(inputs), **pictures}
        self.reset()
        return self.collect(ids, len(ids), opts, extra, on_event, cancel)

    def continue_stream(self, new_ids: list[int], opts, timing: Timing, extra=None, cancel=None) -> Iterator[StreamEvent]:
        """Feed ``new_ids`` after the ids the state holds, then stream the reply (``cancel``: also
        read between the chunks of a long prefill, where the loop feeds one in chunks)."""
        loaded = self.loaded
        loop = loaded.loop(loaded.executor, loaded.sampler(opts), opts, stop_ids(opts, loaded.eos),
                           timing, extra)
        if cancel is not None and hasattr(loop, "cancel"):
            loop.cancel = cancel
        steps = loop.run(self.history, new_ids)
        text = loaded.text
        detok = None
        if text is not None:
            special = frozenset(loaded.eos) | frozenset(text.special_token_ids)
            detok = IncrementalDetokenizer(text.decode, skip_special_tokens_ids=special,
                                           hold_ids=frozenset(getattr(text, "byte_fallback_ids", ())))
        stops = StopStrings(opts.stop_strings if detok else ())
        pending: list[int] = []
        self.sequences = None
        for token, finish in steps:
            pending.append(token)
            delta = detok.push(token) if detok else ""
            if finish and detok:
                delta += detok.flush()
            out, hit = stops.push(delta)
            if hit:
                finish = "stop"
            if finish:
                out += stops.flush() if not hit else ""
                self.final_outputs = loop.final_outputs
                if getattr(loop, "sequences", None) is not None:
                    self.sequences = self._beams(loop.sequences)
                yield StreamEvent(out, pending, finish)
                steps.close()
                return
            if out or pending:
                yield StreamEvent(out, pending)
                pending = []

    def _beams(self, beams) -> list[dict]:
        """Beam search's returned sequences as plain dicts (text as the streamed text skips ids)."""
        text = self.loaded.text
        if text is None:
            return [b.to_dict() for b in beams]
        skip = frozenset(self.loaded.eos) | frozenset(text.special_token_ids)   # as the detokenizer's
        return [b.to_dict(text.decode([t for t in b.tokens if t not in skip])) for b in beams]

    def collect(self, new_ids, prompt_len, opts, extra=None, on_event=None, cancel=None) -> GenerationResult:
        """Run ``continue_stream`` to the end (or ``cancel``) and gather the result."""
        timing = Timing()
        tokens, parts, finish = [], [], None
        events = self.continue_stream(new_ids, opts, timing, extra, cancel)
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
        if finish is None and cancel is not None and cancel():
            finish = "cancelled"   # during the prefill: no token was made
        sequences = self.sequences if finish != "cancelled" else None
        return GenerationResult(tokens, "".join(parts), finish, prompt_len, prompt_len - len(new_ids),
                                timing.prefill_ms, timing.decode_tokens_per_s, list(self.loaded.warnings),
                                timing.speculation.to_dict() if timing.speculation else None,
                                sequences, padded(sequences, self.loaded.spec.tokens.pad))


def _check_unicode(name: str, text: str) -> None:
    """Text a tokenizer can take: no lone surrogates (they have no UTF-8 form)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{name}: not valid Unicode text ({exc.reason} at character {exc.start})") from None
