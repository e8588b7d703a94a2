"""The autoregressive loop, nanoGPT-style: step, sample, check, append.

``Autoregressive.run(sequence)`` is the innermost layer: it runs the init flow, then one
step-flow pass per token (or per verified draft), and yields a ``GenerationStep`` per token;
the last one carries the finish reason and, when the model ended, what the final flow made,
plus the timings. Per-sequence state (ids, budget, stop checks, sampler, cancel, masks) lives
in the ``Sequence`` (loops/sequence.py), never in the loop. Text and whole results are built on
it in pipeline/text_generation.py.
"""

from __future__ import annotations

import time
from typing import Iterator

from ..errors import InputError
from ..search.beam import BeamSearch
from .base import LoopStrategy
from .sequence import GenerationStep, Sequence, Speculation, Timing

__all__ = ["Autoregressive", "GenerationStep", "PREFILL_CHUNK", "Sequence", "Speculation", "Timing"]


# A long prompt is fed this many tokens per engine call when the caller can cancel, so a cancel
# lands between chunks instead of after the whole prefill (docs/browser-runtime.md).
PREFILL_CHUNK = 128


class Autoregressive(LoopStrategy):
    name = "autoregressive"
    supplies = ("input_ids", "generated_ids")
    reads = ("logits",)
    makes_tokens = True

    def __init__(self, executor, extra: dict | None = None):
        """``extra`` holds the caller's other pipeline inputs (name -> (flat values, shape))."""
        self.executor = executor
        self.extra = extra or {}

    def run(self, seq: Sequence) -> Iterator[GenerationStep]:
        """Feed ``seq.new_ids`` after ``seq.ids`` (ids already in the state), then generate.

        ``seq.ids`` is extended with every id the state takes in, so a caller that stops early
        still holds ids that match the state. With a drafter, each pass after the first feeds
        the last token plus a draft and keeps the tokens the model picks at every position up
        to the first that differs from the draft: the same tokens as one pass per token, fewer
        passes. ``seq.cancel`` is read after every token but the last (and between prefill
        chunks); a cancel ends with a response that has no token.
        """
        if seq.drafter is not None:
            why = self.executor.cannot_rewind()
            if why:
                raise InputError(f"speculative decoding drops the positions of rejected drafts, but {why}: "
                                 f"call without speculative")
        if seq.options.num_beams > 1:
            if seq.logit_mask is not None:
                raise InputError("logit_mask: beam search (num_beams > 1) takes no per-step mask; "
                                 "call with num_beams 1")
            if seq.grammar is not None:
                raise InputError("num_beams: beam search does not follow a grammar (response_format, "
                                 "regex, grammar, tool_choice); call with num_beams 1")
            yield from self._run_beams(seq)
            return
        executor, extra, timing, text = self.executor, self.extra, seq.timing, seq.text
        ids, generated, new_ids = seq.ids, seq.generated, seq.new_ids
        start = time.perf_counter()
        if executor.has_phase("init"):
            executor.run_phase("init", {**extra, "input_ids": (new_ids, (1, len(new_ids)))})
        feed = self._prefill_chunks(seq)
        if feed is None:   # cancelled between prefill chunks: no token made; the state holds ``ids``
            yield GenerationStep(None, None, "cancelled", timing=timing)
            return
        try:
            while True:
                draft = seq.draft(feed) if seq.drafter is not None else []   # no copy of the ids per plain token
                fed = feed + draft
                outs = executor.run_phase("step", {**extra, "input_ids": (fed, (1, len(fed)))},
                                          new_length=len(fed))
                ids.extend(feed)
                if not generated:   # positions a plugin added that the ids don't count
                    seq.offset = executor.length - len(ids) - len(draft)
                tokens = self._verify(outs["logits"], seq, draft) if draft else [self._pick(outs["logits"], seq)]
                for j, token in enumerate(tokens):
                    if j:
                        ids.append(tokens[j - 1])   # a confirmed draft token: the state holds it
                    if seq.grammar is not None:
                        seq.accept(token)
                    generated.append(token)
                    start = timing.count(start, len(generated) == 1)
                    finish = seq.finish_of(token)
                    delta, hit = text.push(token, finish is not None) if text is not None else (None, False)
                    if finish or hit:   # a stop string alone ends the text, not the model: no final flow
                        self._rewind(seq)
                        outputs = executor.run_phase("final", {**extra, "generated_ids": (
                            generated, (1, len(generated)))}) if finish and executor.has_phase("final") else {}
                        yield GenerationStep(token, delta, "stop" if hit else finish, outputs, timing=timing)
                        return
                    yield GenerationStep(token, delta)
                    if seq.cancel is not None and seq.cancel():
                        yield GenerationStep(None, None, "cancelled", timing=timing)
                        return
                self._rewind(seq)   # positions of rejected drafts go
                feed = [tokens[-1]]
        finally:   # a caller that stops early (or an error) leaves the state matching ``seq.ids``
            self._rewind(seq)

    def _prefill_chunks(self, seq: Sequence) -> list[int] | None:
        """Feed all but the last PREFILL_CHUNK tokens of a long prompt chunk by chunk, reading
        ``seq.cancel`` after each; returns the rest (for the first token's step), or None if cancelled.

        Only where feeding several tokens after a kept state is already what a chat continuation
        does: a state that can be rewound, aligned with ``seq.ids``, no init flow (it takes the
        whole prompt at once) and no other pipeline inputs (they go with the whole prompt)."""
        executor, new_ids = self.executor, seq.new_ids
        if (seq.cancel is None or len(new_ids) <= PREFILL_CHUNK or self.extra or executor.has_phase("init")
                or executor.length != len(seq.ids) or executor.cannot_rewind() is not None):
            return new_ids
        while len(new_ids) > PREFILL_CHUNK:
            part, new_ids = new_ids[:PREFILL_CHUNK], new_ids[PREFILL_CHUNK:]
            executor.run_phase("step", {"input_ids": (part, (1, len(part)))}, new_length=len(part))
            seq.ids.extend(part)
            if seq.cancel():
                return None
        return new_ids

    # ---- one token, or a draft verified --------------------------------------------------------

    def _run_beams(self, seq: Sequence) -> Iterator[GenerationStep]:
        """The best beam's tokens, once the search is done (the state is left empty); the last
        response carries all returned beams."""
        beams = BeamSearch(self.executor, seq.sampler, seq.options, seq.stop, seq.timing, self.extra) \
            .run(seq.ids, seq.new_ids)
        best, text = beams[0], seq.text
        last = len(best.tokens) - 1
        for i, token in enumerate(best.tokens):
            delta, hit = text.push(token, i == last) if text is not None else (None, False)
            if i == last or hit:
                yield GenerationStep(token, delta, "stop" if hit else best.finish_reason, beams=beams,
                                     timing=seq.timing)
                return
            yield GenerationStep(token, delta)
            if seq.cancel is not None and seq.cancel():
                yield GenerationStep(None, None, "cancelled", timing=seq.timing)
                return

    def _pick(self, logits, seq: Sequence) -> int:
        penalty_ids = getattr(self.executor.plugin, "penalty_ids", None)
        ids = seq.ids
        allowed = None
        if seq.grammar is not None:
            seq.grammar.fill(0)
            allowed = seq.grammar.allowed(self.executor.backend, 1)
        return seq.sampler(logits, penalty_ids(ids, seq.generated) if penalty_ids else ids,
                           start=not seq.generated, masked=seq.masked() if seq.masking else (),
                           allowed=allowed)

    def _verify(self, logits, seq: Sequence, draft: list[int]) -> list[int]:
        """The model's token at each fed position, up to and including the first that differs
        from ``draft`` (all of them plus one more when the whole draft holds)."""
        shape = self.executor.backend.shape(logits)
        if len(shape) != 3 or shape[1] != len(draft) + 1:
            raise InputError(f"speculative decoding needs logits for every fed token: {len(draft) + 1} "
                             f"were fed and the logits have shape {list(shape)}; call without speculative")
        sampler, ids = seq.sampler, seq.ids
        if sampler.penalty:   # each row's own ids so far; without a penalty only the count matters
            penalty_ids = getattr(self.executor.plugin, "penalty_ids", None)
            rows = []
            for i in range(len(draft) + 1):
                seen, made = ids + draft[:i], seq.generated + draft[:i]
                rows.append(penalty_ids(seen, made) if penalty_ids else seen)
        else:
            rows = [ids] * (len(draft) + 1)
        allowed = seq.grammar.allowed(self.executor.backend, len(draft) + 1) if seq.grammar is not None else None
        picked = sampler.rows(logits, rows, allowed)
        accepted = 0
        while accepted < len(draft) and picked[accepted] == draft[accepted]:
            accepted += 1
        sampler.unread(len(draft) - accepted)   # draws of discarded positions come back
        seq.window.update(len(draft), accepted)
        stats = seq.timing.speculation
        stats.passes += 1
        stats.drafted += len(draft)
        stats.accepted += accepted
        return picked[:accepted + 1]

    def _rewind(self, seq: Sequence) -> None:
        """Drop positions the state took in past ``seq.ids`` (rejected or unused drafts). Only
        drafts leave such positions, and only on states checked to rewind; if one still
        refuses, the state no longer matches the ids and a chat starts over (conversation.py)."""
        target = len(seq.ids) + seq.offset
        if seq.drafter is not None and self.executor.length > target:
            self.executor.rewind(target)
