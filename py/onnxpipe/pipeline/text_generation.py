"""Tokens and text from an autoregressive pipeline.

Layers (mlx-lm style): the ``Autoregressive`` loop yields ``GenerationStep`` responses (token,
text, and on the last the finish reason, final outputs, beams, timings) for one ``Sequence`` ->
``stream`` yields events with text deltas and a ``finish_reason`` -> ``generate`` collects the
whole result from the events alone. The ids the state holds are the last sequence's, so a
conversation can continue from them (``history``, changed only through ``keep`` and ``reset``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from ..audio.phi4_features import refuse_tags_without_clips
from ..errors import InputError
from ..grammar.check import check_output
from ..grammar.formats import Constraint, constraint_from
from ..loops import GenerationStep, Sequence, Timing
from ..search.detokenize import IncrementalDetokenizer, TextStream
from ..search.stopping import stop_ids
from .checks import check_unicode

# A reply's new-token budget when a call names neither max_new_tokens nor max_length: the
# browser pages' default too. A bundle's max_length is its context (8,192 for SmolLM2), and a
# model that misses its end-of-turn token would otherwise write until the context is full.
DEFAULT_MAX_NEW_TOKENS = 256

@dataclass
class Guide:
    """A call's constraint, compiled (grammar/engine.py) before the generation starts."""
    constraint: Constraint
    compiled: object
    info: object   # grammar.engine.CompileInfo

    def report(self, matcher, text: str) -> dict:
        """compile facts, ``complete`` (the grammar ended) and, when complete, ``valid`` /
        ``error`` from grammar/check.py (the engine's known gaps caught; None: not checked)."""
        out = {**self.info.to_dict(), "complete": bool(matcher.terminated)}
        if out["complete"]:
            out["valid"], error = check_output(self.constraint, text)
            if error is not None:
                out["error"] = error
        return out


@dataclass
class StreamEvent:
    text: str                      # new text since the previous event (never broken UTF-8)
    token_ids: list[int]           # ids generated since the previous event
    finish_reason: str | None = None   # "stop" | "length" | "cancelled" | "tool_calls" on the last event
    # on the last event: the loop's last response (final outputs, beams, timings)
    final: GenerationStep | None = field(default=None, repr=False)
    # chat with tools, on the last event: the reply's tool calls (OpenAI's shape; finish_reason
    # "tool_calls") and its content (the text without them)
    tool_calls: list[dict] | None = None
    content: str | None = None


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
    # constrained output (response_format / regex / grammar): the constraint's kind, compile_ms
    # (0 when cached), cached, vocabulary_ms (the engine's start, first constrained call only) and
    # complete (the grammar ended: the text is a whole match; False with finish_reason "length")
    grammar: dict | None = None
    # chat with tools: the calls the reply makes, OpenAI's shape ([{"id": "call_<hex>", "type":
    # "function", "function": {"name", "arguments": JSON text}}]); text is then the rest of the
    # reply (OpenAI's content) and finish_reason "tool_calls"
    tool_calls: list[dict] | None = None

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
        if self.grammar is not None:
            out["grammar"] = self.grammar
        if self.tool_calls is not None:
            out["tool_calls"] = self.tool_calls
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
        self.sequence: Sequence | None = None   # the last generation's: its ids are what the state holds
        self.final_outputs: dict = {}    # what the final flow made in the last generation

    @property
    def history(self) -> list[int]:
        """Ids the state holds (a chat continues from here); change it through keep() / reset()."""
        return self.sequence.ids if self.sequence is not None else []

    def reset(self) -> None:
        """Forget the conversation: empty state."""
        self.loaded.reset()
        self.sequence = None
        self.final_outputs = {}

    def keep(self, count: int) -> bool:
        """Rewind the state to its first ``count`` ids; False (nothing changed) where it can't."""
        if self.sequence is None or not self.loaded.executor.rewind(count):
            return False
        self.sequence.keep(count)
        return True

    # ---- checks --------------------------------------------------------------------------------

    def prompt_ids(self, prompt, input_ids) -> list[int]:
        start = self.loaded.start_ids
        if prompt is None and input_ids is None and start:
            return list(self.loaded.fed_start_ids())   # the bundle's own start, in the vocabulary
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
            check_unicode("prompt", prompt)
            ids = self.loaded.tokenizer().encode(prompt, add_special_tokens=True) if prompt else []
        if not ids:
            raise InputError("empty prompt: nothing to generate from")
        vocab = self.loaded.vocab_size
        placeholder = self.loaded.images.token if self.loaded.images is not None else None
        # an image token past the vocabulary (Phi-4-multimodal's 200010) only reaches the embedding session
        bad = [i for i in ids if not 0 <= i < vocab and i != placeholder] if vocab else []
        if bad:
            raise InputError(f"input_ids: {bad[:5]} outside the vocabulary (0..{vocab - 1})")
        return ids

    @staticmethod
    def check_length(total: int, opts) -> None:
        if total >= opts.max_length:
            raise InputError(f"prompt is {total} tokens but the context holds {opts.max_length} "
                             f"(generation.max_length); shorten it or start a new chat")

    def _prepare(self, prompt, input_ids, max_new_tokens, search, images=None, audios=None):
        """(prompt ids, options, the images' (or clips') pipeline inputs)."""
        self.loaded.require_loop(True, "run(inputs=...); generate() and chat() need a token loop")
        if audios:   # Phi-4-multimodal clips: the prompt's <|audio_N|> tags expanded (audio/phi4_features.py)
            if input_ids is not None:
                raise InputError("audios: give them with a text prompt alone, not input_ids (ids can't say "
                                 "where the clips go)")
            front = self.loaded.images
            if images and front is not None and not front.config.dynamic_hd_crops:
                raise InputError("audios with images: only a Phi-4-multimodal image processor places both "
                                 "(<|image_N|> and <|audio_N|> tags in one prompt); this bundle's does not")
            if isinstance(prompt, str):
                check_unicode("prompt", prompt)
                prompt = front.phi4_text(prompt) if front is not None else prompt   # image tags: genai's ids
            ids, clips = self.loaded.with_audios(prompt, audios, bool(images))
            ids, pictures = self.loaded.with_images(ids, images)   # each image's ids expanded
            opts = self.loaded.options(search, max_new_tokens, DEFAULT_MAX_NEW_TOKENS)
            self.check_length(len(ids), opts)
            return ids, opts, {**clips, **pictures}
        if self.loaded.speech is not None and isinstance(prompt, str):
            refuse_tags_without_clips(prompt)
        if isinstance(prompt, str) and isinstance(images, (list, tuple)) and images \
                and self.loaded.images is not None:
            prompt = self.loaded.images.expand_prompt(prompt, list(images))   # Gemma 3 / 4's text rule
        tagged = None   # Phi-3-vision: pieces between <|image_N|> tags tokenized apart
        if isinstance(prompt, str) and input_ids is None and self.loaded.images is not None:
            check_unicode("prompt", prompt)
            tagged = self.loaded.images.tagged_ids(prompt, len(images or ()), self.loaded.tokenizer())
        ids, pictures = self.loaded.with_images(tagged or self.prompt_ids(prompt, input_ids), images)
        opts = self.loaded.options(search, max_new_tokens, DEFAULT_MAX_NEW_TOKENS)
        self.check_length(len(ids), opts)
        return ids, opts, pictures

    def guide(self, response_format, opts) -> Guide | None:
        """The compiled grammar ``response_format`` asks for (checked against ``opts``), or None;
        compiled before the state changes, so a bad schema leaves a conversation as it was."""
        constraint = constraint_from(response_format)
        if constraint is None:
            return None
        if opts.num_beams > 1:
            raise InputError(f"num_beams: beam search does not follow a grammar ({constraint.field}); "
                             f"call with num_beams 1")
        if opts.stop_strings:
            raise InputError(f"stop: a stop string would cut the output {constraint.field} constrains "
                             f"short of a whole match; the grammar ends it itself")
        compiled, info = self.loaded.grammar().compile(constraint)
        return Guide(constraint, compiled, info)

    # ---- generation ----------------------------------------------------------------------------

    def stream(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None, images=None,
               logit_mask=None, response_format=None, audios=None, **search) -> Iterator[StreamEvent]:
        """Generate from a fresh state, yielding text deltas as they become complete.

        ``inputs`` gives other pipeline inputs (e.g. pixel values): name -> (flat values, shape);
        ``images`` (onnxpipe.image.Image) go through the bundle's image preprocessing, ``audios``
        ((samples, sample_rate) clips) through its speech preprocessing;
        ``logit_mask(generated_ids)`` returns ids the next token may not be (loops/sequence.py);
        ``response_format``: the output's constraint (grammar/formats.py: json_object,
        json_schema, and the extras regex and grammar).
        """
        ids, opts, pictures = self._prepare(prompt, input_ids, max_new_tokens, search, images, audios)
        guide = self.guide(response_format, opts)
        self.reset()
        return self.continue_stream(ids, opts, {**self.loaded.inputs(inputs), **pictures}, logit_mask=logit_mask,
                                    guide=guide)

    def generate(self, prompt=None, input_ids=None, max_new_tokens=None, inputs=None,
                 on_event=None, cancel=None, images=None, logit_mask=None, response_format=None,
                 audios=None, **search) -> GenerationResult:
        """The whole result of ``stream``: new token ids, text, finish reason and timings.

        ``on_event`` sees every StreamEvent as it happens; ``cancel()`` returning True stops
        the generation before the next step (finish_reason "cancelled").
        """
        ids, opts, pictures = self._prepare(prompt, input_ids, max_new_tokens, search, images, audios)
        extra = {**self.loaded.inputs(inputs), **pictures}
        guide = self.guide(response_format, opts)
        self.reset()
        return self.collect(ids, len(ids), opts, extra, on_event, cancel, logit_mask, guide)

    def sequence_for(self, held: list[int], new_ids: list[int], opts, cancel=None, logit_mask=None,
                     guide: Guide | None = None) -> Sequence:
        """The Sequence that feeds ``new_ids`` after ``held`` (the ids the state holds; [] for a
        fresh one): its stop ids, sampler, text stream (stop strings) and grammar matcher."""
        loaded = self.loaded
        text = loaded.text
        stream = None
        if text is not None:
            special = frozenset(loaded.eos) | frozenset(text.special_token_ids)
            stream = TextStream(IncrementalDetokenizer(text.decode, skip_special_tokens_ids=special,
                                                       hold_ids=frozenset(getattr(text, "byte_fallback_ids", ()))),
                                opts.stop_strings)
        stop = stop_ids(opts, loaded.eos)
        matcher = None
        if guide is not None:
            rows = opts.speculative.max_draft + 1 if opts.speculative is not None else 1
            matcher = loaded.grammar().matcher(guide.compiled, stop, rows)
        return Sequence(held, new_ids, opts, stop, loaded.sampler(opts), stream, cancel, logit_mask, matcher)

    def prepare_reply(self, prompt=None, input_ids=None, max_new_tokens=None, cancel=None, logit_mask=None,
                      response_format=None, **search) -> tuple[Sequence, Reply]:
        """A fresh generation built but not run: (its Sequence, the Reply that turns its
        GenerationSteps into StreamEvents and a GenerationResult). The state is untouched: whoever
        runs the Sequence (loops/batched.py's BatchedDecoder) owns the executor. Every argument is
        checked here, as ``generate`` checks it; no images or extra inputs (a batch row takes
        input_ids only)."""
        ids, opts, _ = self._prepare(prompt, input_ids, max_new_tokens, search)
        guide = self.guide(response_format, opts)
        seq = self.sequence_for([], ids, opts, cancel, logit_mask, guide)
        return seq, Reply(self.loaded, seq, len(ids), guide)

    def continue_stream(self, new_ids: list[int], opts, extra=None, cancel=None,
                        logit_mask=None, guide: Guide | None = None, prompt_len: int | None = None,
                        use=None) -> Iterator[StreamEvent]:
        """Feed ``new_ids`` after the ids the state holds, then stream the reply; ``cancel()``
        returning True ends it before the next step (also between the chunks of a long prefill)
        with a last event that has no token and finish_reason "cancelled". ``use`` (a chat's
        pipeline/tool_use.py ToolUse): the last event carries the reply's tool calls."""
        seq = self.sequence_for(self.history, new_ids, opts, cancel, logit_mask, guide)
        reply = Reply(self.loaded, seq, len(seq.ids) + len(new_ids) if prompt_len is None else prompt_len,
                      guide, use)
        return self._run(seq, reply, extra)

    def _run(self, seq: Sequence, reply: Reply, extra=None) -> Iterator[StreamEvent]:
        """Run ``seq`` on the bundle's own loop, each step through ``reply``."""
        loaded = self.loaded
        self.sequence = seq
        steps = loaded.loop(loaded.executor, extra).run(seq)
        try:
            for step in steps:
                event = reply.event(step)
                if event.finish_reason is None:
                    yield event
                    continue
                if event.finish_reason != "cancelled":
                    self.final_outputs = step.outputs
                yield event
                return
        finally:   # a caller that stops early: the loop leaves the state matching the sequence's ids
            steps.close()

    def collect(self, new_ids, prompt_len, opts, extra=None, on_event=None, cancel=None,
                logit_mask=None, guide: Guide | None = None, use=None) -> GenerationResult:
        """Run the sequence to the end (or ``cancel``) and gather the result from its steps; with
        ``use`` (a chat's ToolUse) the result carries the reply's tool calls."""
        seq = self.sequence_for(self.history, new_ids, opts, cancel, logit_mask, guide)
        reply = Reply(self.loaded, seq, prompt_len, guide, use)
        for event in self._run(seq, reply, extra):
            if on_event is not None and event.finish_reason != "cancelled":   # a cancel brings nothing new
                on_event(event)
        return reply.result()


class Reply:
    """One generation's side of its Sequence: each GenerationStep the loop (or a batch) makes for
    it becomes a StreamEvent (``event``), and at the end the whole GenerationResult (``result``):
    tokens, text, finish reason, timings, beams, the grammar report and, with ``use`` (a chat's
    pipeline/tool_use.py ToolUse), the tool calls parsed from the reply. The one implementation
    behind stream, generate, chat and the server's batched rows."""

    def __init__(self, loaded, seq: Sequence, prompt_len: int, guide: Guide | None = None, use=None):
        self.loaded, self.seq, self.guide, self.use = loaded, seq, guide, use
        self.prompt_len = prompt_len
        self.cached = prompt_len - len(seq.new_ids)   # prompt ids the state already held
        self.tokens: list[int] = []
        self.parts: list[str] = []
        self.last: GenerationStep | None = None   # the loop's last response, once it came

    @property
    def done(self) -> bool:
        return self.last is not None

    def event(self, step: GenerationStep) -> StreamEvent:
        """The StreamEvent of ``step``; the last one (finish_reason set) keeps the step as ``final``
        and, with tools, carries the reply's tool_calls and content."""
        tokens = [] if step.token is None else [step.token]
        self.tokens.extend(tokens)
        self.parts.append(step.text or "")
        finish = step.finish_reason
        if finish is None:
            return StreamEvent(step.text or "", tokens)
        self.last = step
        event = StreamEvent(step.text or "", tokens, finish, step)
        if self.use is not None and finish != "cancelled":
            event.content, event.tool_calls, event.finish_reason = self.use.parse("".join(self.parts), finish)
        return event

    def result(self) -> GenerationResult:
        """The whole reply, once the last step came."""
        last = self.last
        finish = last.finish_reason if last is not None else None
        timing = last.timing if last is not None and last.timing is not None else Timing()
        sequences = _beams(self.loaded, last.beams) if finish != "cancelled" and last is not None and \
            last.beams is not None else None
        text = "".join(self.parts)
        result = GenerationResult(list(self.tokens), text, finish, self.prompt_len, self.cached,
                                  timing.prefill_ms, timing.decode_tokens_per_s, list(self.loaded.warnings),
                                  timing.speculation.to_dict() if timing.speculation else None,
                                  sequences, padded(sequences, self.loaded.spec.tokens.pad),
                                  self.guide.report(self.seq.grammar, text) if self.guide is not None else None)
        return self.use.finish(result) if self.use is not None else result


def _beams(loaded, beams) -> list[dict]:
    """Beam search's returned sequences as plain dicts (text as the streamed text skips ids)."""
    text = loaded.text
    if text is None:
        return [b.to_dict() for b in beams]
    skip = frozenset(loaded.eos) | frozenset(text.special_token_ids)   # as the detokenizer's
    return [b.to_dict(text.decode([t for t in b.tokens if t not in skip])) for b in beams]
