"""The autoregressive loop, nanoGPT-style: step, sample, check, append.

``Autoregressive.run`` is the innermost layer: it runs the init flow, then one step-flow
pass per token, and yields ``(token, finish_reason)``; when it finishes it runs the final
flow and keeps what that made in ``final_outputs`` for its caller. Streaming text and results
are built on it in ``generation/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..errors import InputError
from ..search import masks
from ..search.beam import BeamSearch
from ..search.options import SearchOptions
from ..search.speculative import DraftWindow, drafter_for
from .base import LoopStrategy


@dataclass
class Speculation:
    """Speculative decoding's counts for one generation (zeros when it was off)."""
    passes: int = 0       # decoder passes that verified drafts
    drafted: int = 0      # draft tokens fed
    accepted: int = 0     # draft tokens the model confirmed

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    def to_dict(self) -> dict:
        return {"passes": self.passes, "drafted": self.drafted, "accepted": self.accepted,
                "acceptance_rate": round(self.acceptance_rate, 4)}


@dataclass
class Timing:
    prefill_s: float = 0.0
    decode_s: float = 0.0
    decode_tokens: int = 0
    marks: list = field(default_factory=list)
    speculation: Speculation | None = None   # set by a loop that verifies drafts

    def count(self, start: float, first: bool) -> float:
        """Count one token made since ``start`` (the first one ends the prefill); returns now."""
        now = time.perf_counter()
        if first:
            self.prefill_s = now - start
        else:
            self.decode_s += now - start
            self.decode_tokens += 1
        return now

    @property
    def prefill_ms(self) -> float:
        return self.prefill_s * 1000.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else 0.0


# A long prompt is fed this many tokens per engine call when the caller can cancel, so a cancel
# lands between chunks instead of after the whole prefill (docs/browser-runtime.md).
PREFILL_CHUNK = 128


class Autoregressive(LoopStrategy):
    name = "autoregressive"
    supplies = ("input_ids", "generated_ids")
    reads = ("logits",)
    makes_tokens = True
    # the caller's cancel check (set by text_generation.collect): read between prefill chunks
    cancel = None

    def __init__(self, executor, sampler, options: SearchOptions, stop: frozenset[int],
                 timing: Timing | None = None, extra: dict | None = None):
        """``extra`` holds the caller's other pipeline inputs (name -> (flat values, shape))."""
        self.executor = executor
        self.sampler = sampler
        self.options = options
        self.stop = stop
        self.timing = timing or Timing()
        self.extra = extra or {}
        self.final_outputs: dict[str, Any] = {}   # what the final flow made, once finished
        self._offset = 0
        self.drafter = None
        # masks some tokens need (search/masks.py); False keeps the plain path as it was
        self._masking = bool(options.min_length or options.min_new_tokens or options.no_repeat_ngram_size)
        vocab = sampler.vocab
        self._ends = tuple(sorted(i for i in stop if vocab is None or i < vocab))
        # num_beams > 1: search/beam.py runs the whole search; ``sequences`` then holds the
        # returned beams (best first) with their scores
        self.beams = BeamSearch(executor, sampler, options, stop, self.timing, extra) \
            if options.num_beams > 1 else None
        self.sequences = None
        if options.speculative is not None:
            why = executor.cannot_rewind()
            if why:
                raise InputError(f"speculative decoding drops the positions of rejected drafts, but {why}: "
                                 f"call without speculative")
            self.drafter = drafter_for(options.speculative)
            self.window = DraftWindow(options.speculative.max_draft)
            self.timing.speculation = Speculation()

    def run(self, history: list[int], new_ids: list[int]) -> Iterator[tuple[int, str | None]]:
        """Feed ``new_ids`` after ``history`` (ids already in the state), then generate.

        ``history`` is extended in place with every id the state has taken in, so a caller
        that stops early still holds a history that matches the state. With a drafter, each
        pass after the first feeds the last token plus a draft and keeps the tokens the model
        picks at every position up to the first that differs from the draft: the same tokens
        as one pass per token, fewer passes.
        """
        if self.beams is not None:
            yield from self._run_beams(history, new_ids)
            return
        executor, options, timing, extra = self.executor, self.options, self.timing, self.extra
        generated: list[int] = []
        budget = options.max_new_tokens if options.max_new_tokens is not None else options.max_length
        produced = 0
        start = time.perf_counter()
        if executor.has_phase("init"):
            executor.run_phase("init", {**extra, "input_ids": (new_ids, (1, len(new_ids)))})
        feed = self._prefill_chunks(history, new_ids)
        if feed is None:   # cancelled between prefill chunks: no token made; the state holds ``history``
            return
        try:
            while True:
                draft = self._draft(history + feed, budget - produced - 1,
                                    options.max_length - len(history) - len(feed) - 1) \
                    if generated and self.drafter is not None and not self._ends_masked(
                        len(history) + len(feed), len(generated)) else []   # no copy of the ids per plain token
                fed = feed + draft
                outs = executor.run_phase("step", {**extra, "input_ids": (fed, (1, len(fed)))},
                                          new_length=len(fed))
                history.extend(feed)
                if not generated:   # positions a plugin added that the history doesn't count
                    self._offset = executor.length - len(history) - len(draft)
                tokens = self._verify(outs["logits"], history, generated, draft) if draft else \
                    [self._pick(outs["logits"], history, generated)]
                for j, token in enumerate(tokens):
                    if j:
                        history.append(tokens[j - 1])   # a confirmed draft token: the state holds it
                    produced += 1
                    start = timing.count(start, produced == 1)
                    finish = None
                    if token in self.stop:   # end ids are masked until min_length / min_new_tokens
                        finish = "stop"
                    elif produced >= budget or len(history) + 1 >= options.max_length:
                        finish = "length"
                    generated.append(token)
                    if finish:
                        self._rewind(history)
                        if executor.has_phase("final"):
                            self.final_outputs = executor.run_phase(
                                "final", {**extra, "generated_ids": (generated, (1, len(generated)))})
                        yield token, finish
                        return
                    yield token, None
                self._rewind(history)   # positions of rejected drafts go
                feed = [tokens[-1]]
        finally:   # a caller that stops early (or an error) leaves the state matching ``history``
            self._rewind(history)

    def _prefill_chunks(self, history: list[int], new_ids: list[int]) -> list[int] | None:
        """Feed all but the last PREFILL_CHUNK tokens of a long prompt chunk by chunk, reading
        ``cancel`` after each; returns the rest (for the first token's step), or None if cancelled.

        Only where feeding several tokens after a kept state is already what a chat continuation
        does: a state that can be rewound, aligned with ``history``, no init flow (it takes the
        whole prompt at once) and no other pipeline inputs (they go with the whole prompt)."""
        executor = self.executor
        if (self.cancel is None or len(new_ids) <= PREFILL_CHUNK or self.extra or executor.has_phase("init")
                or executor.length != len(history) or executor.cannot_rewind() is not None):
            return new_ids
        while len(new_ids) > PREFILL_CHUNK:
            part, new_ids = new_ids[:PREFILL_CHUNK], new_ids[PREFILL_CHUNK:]
            executor.run_phase("step", {"input_ids": (part, (1, len(part)))}, new_length=len(part))
            history.extend(part)
            if self.cancel():
                return None
        return new_ids

    # ---- one token, or a draft verified --------------------------------------------------------

    def _run_beams(self, history: list[int], new_ids: list[int]) -> Iterator[tuple[int, str | None]]:
        """The best beam's tokens, once the search is done (the state is left empty)."""
        self.sequences = self.beams.run(history, new_ids)
        best = self.sequences[0]
        for i, token in enumerate(best.tokens):
            yield token, best.finish_reason if i == len(best.tokens) - 1 else None

    def _ends_masked(self, length: int, new: int) -> bool:
        return self._masking and masks.ends_masked(self.options, length, new)

    def _masked(self, history: list[int], generated: list[int]) -> tuple[int, ...]:
        """Ids the next pick may not take: end ids under the minimum length, repeated n-grams."""
        masked = self._ends if masks.ends_masked(self.options, len(history), len(generated)) else ()
        n = self.options.no_repeat_ngram_size
        return masked + tuple(masks.repeated_ngram_ids(history, n)) if n else masked

    def _pick(self, logits, history: list[int], generated: list[int]) -> int:
        penalty_ids = getattr(self.executor.plugin, "penalty_ids", None)
        return self.sampler(logits, penalty_ids(history, generated) if penalty_ids else history,
                            start=not generated, masked=self._masked(history, generated) if self._masking else ())

    def _draft(self, ids: list[int], budget: int, room: int) -> list[int]:
        """A draft to verify after ``ids``: no longer than the token budget or the context allow."""
        limit = min(self.window.limit(), budget, room) if self.drafter else 0
        return self.drafter.propose(ids, limit) if limit > 0 else []

    def _verify(self, logits, history: list[int], generated: list[int], draft: list[int]) -> list[int]:
        """The model's token at each fed position, up to and including the first that differs
        from ``draft`` (all of them plus one more when the whole draft holds)."""
        shape = self.executor.backend.shape(logits)
        if len(shape) != 3 or shape[1] != len(draft) + 1:
            raise InputError(f"speculative decoding needs logits for every fed token: {len(draft) + 1} "
                             f"were fed and the logits have shape {list(shape)}; call without speculative")
        if self.sampler.penalty:   # each row's own ids so far; without a penalty only the count matters
            penalty_ids = getattr(self.executor.plugin, "penalty_ids", None)
            rows = []
            for i in range(len(draft) + 1):
                seen, made = history + draft[:i], generated + draft[:i]
                rows.append(penalty_ids(seen, made) if penalty_ids else seen)
        else:
            rows = [history] * (len(draft) + 1)
        picked = self.sampler.rows(logits, rows)
        accepted = 0
        while accepted < len(draft) and picked[accepted] == draft[accepted]:
            accepted += 1
        self.sampler.unread(len(draft) - accepted)   # draws of discarded positions come back
        self.window.update(len(draft), accepted)
        stats = self.timing.speculation
        stats.passes += 1
        stats.drafted += len(draft)
        stats.accepted += accepted
        return picked[:accepted + 1]

    def _rewind(self, history: list[int]) -> None:
        """Drop positions the state took in past ``history`` (rejected or unused drafts). Only
        drafts leave such positions, and only on states checked to rewind; if one still
        refuses, the state no longer matches ``history`` and a chat starts over (conversation.py)."""
        target = len(history) + self._offset
        if self.drafter is not None and self.executor.length > target:
            self.executor.rewind(target)
