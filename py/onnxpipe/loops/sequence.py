"""One sequence's generation state, and the responses a token loop yields.

Everything that belongs to one sequence rather than to the loop lives in ``Sequence``: the ids
the state holds, the token budget and stop ids, the sampler (its options and seeded draws), the
drafter, the text stream, the caller's cancel check and per-step mask, the timings. The loop
(loops/autoregressive.py) only steps sequences, so a later loop can step several per engine
call (batch rows joining and leaving between steps) without moving any of this.

``GenerationStep`` is the one shape results come back in (mlx-lm's ``GenerationResponse``):
every response carries its token and text; the last one also carries the finish reason, what
the final flow made, beam search's beams and the timings. Nothing is read back from the loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..errors import EngineError
from ..search import masks
from ..search.detokenize import TextStream
from ..search.options import SearchOptions
from ..search.speculative import DraftWindow, drafter_for


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
    speculation: Speculation | None = None   # set for a sequence that verifies drafts

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


@dataclass(slots=True)
class GenerationStep:
    """One response of a token loop: one token, or (cancelled before the next token) none."""
    token: int | None                  # the id made; None only on a "cancelled" last response
    text: str | None = None            # text this token completes, for a sequence with a text stream
    finish_reason: str | None = None   # None until the last: "stop" | "length" | "cancelled"
    # on the last response only:
    outputs: dict[str, Any] | None = None   # what the final flow made (name -> engine tensor)
    beams: list | None = None          # beam search: the returned beams (search/beam.py Beam), best first
    timing: Timing | None = None       # prefill / decode times; timing.speculation when drafts ran

    @property
    def speculation(self) -> Speculation | None:
        """Speculative decoding's counts (last response, drafts on), else None."""
        return self.timing.speculation if self.timing is not None else None


LogitMask = Callable[[list[int]], Iterable[int]]


class Sequence:
    """One sequence to generate: what it holds, what it may make, when it ends.

    ``held``: ids the engine state already holds (copied: this sequence owns its list, ``ids``,
    and extends it with every id the state takes in); ``new_ids``: ids to feed before the
    first token. ``cancel()`` returning True ends the sequence before its next step (also read
    between the chunks of a long prefill) with finish_reason "cancelled". ``logit_mask(generated)``
    is called before every pick with the ids generated so far and returns ids the pick may not
    take; with it, drafts are not verified (each token's mask depends on the one before).
    ``grammar``: a grammar engine's Matcher (grammar/engine.py) the tokens must follow: its
    allowed-token bitmask goes into the sampler graph, every token is accepted into it, and
    drafts are cut where the grammar refuses them. ``text``: a TextStream turning ids into text
    and finding stop strings, or None (ids only).
    """

    def __init__(self, held: list[int], new_ids: list[int], options: SearchOptions, stop: frozenset[int],
                 sampler, text: TextStream | None = None, cancel: Callable[[], bool] | None = None,
                 logit_mask: LogitMask | None = None, grammar=None):
        self.ids = list(held)
        self.new_ids = list(new_ids)
        self.options = options
        self.stop = stop
        self.sampler = sampler
        self.text = text
        self.cancel = cancel
        self.logit_mask = logit_mask
        self.grammar = grammar
        self.generated: list[int] = []
        self.timing = Timing()
        self.offset = 0   # positions a plugin added that ``ids`` doesn't count
        self.budget = options.max_new_tokens if options.max_new_tokens is not None else options.max_length
        # masks some tokens need (search/masks.py); False keeps the plain path as it was
        self.masking = bool(options.min_length or options.min_new_tokens or options.no_repeat_ngram_size
                            or logit_mask is not None)
        vocab = sampler.vocab
        self.ends = tuple(sorted(i for i in stop if vocab is None or i < vocab))
        self.drafter = self.window = None
        if options.speculative is not None and logit_mask is None:
            self.drafter = drafter_for(options.speculative)
            self.window = DraftWindow(options.speculative.max_draft)
            self.timing.speculation = Speculation()

    def keep(self, count: int) -> None:
        """The state was rewound to its first ``count`` positions: drop the ids past them."""
        del self.ids[count:]

    def finish_of(self, token: int) -> str | None:
        """"stop" for a stop id (end ids are masked until min_length / min_new_tokens), "length"
        when the budget or the context is used up, else None; ``token`` is already counted."""
        if token in self.stop:
            return "stop"
        if len(self.generated) >= self.budget or len(self.ids) + 1 >= self.options.max_length:
            return "length"
        return None

    def ends_masked(self, length: int, new: int) -> bool:
        return self.masking and masks.ends_masked(self.options, length, new)

    def masked(self) -> tuple[int, ...]:
        """Ids the next pick may not take: end ids under the minimum length, repeated n-grams,
        the caller's mask."""
        ids, generated = self.ids, self.generated
        masked = self.ends if masks.ends_masked(self.options, len(ids), len(generated)) else ()
        n = self.options.no_repeat_ngram_size
        if n:
            masked += tuple(masks.repeated_ngram_ids(ids, n))
        if self.logit_mask is not None:
            masked += tuple(self.logit_mask(generated))
        return masked

    def draft(self, feed: list[int]) -> list[int]:
        """A draft to verify after the ids and ``feed``: no longer than the token budget or the
        context allow (empty without a drafter, before the first token, or while end ids are masked)."""
        if self.drafter is None or not self.generated:
            return []
        length = len(self.ids) + len(feed)
        if self.ends_masked(length, len(self.generated)):
            return []
        limit = min(self.window.limit(), self.budget - len(self.generated) - 1,
                    self.options.max_length - length - 1)
        draft = self.drafter.propose(self.ids + feed, limit) if limit > 0 else []
        return self._grammar_draft(draft) if self.grammar is not None and draft else draft

    def _grammar_draft(self, draft: list[int]) -> list[int]:
        """The part of ``draft`` the grammar takes (no stop id: the model picks that itself),
        with the allowed bitmask of each position after it filled in the matcher's rows 0..n."""
        grammar = self.grammar
        grammar.fill(0)
        kept = 0
        for token in draft:
            if token in self.stop or not grammar.accept(token):
                break
            kept += 1
            grammar.fill(kept)
        grammar.rollback(kept)
        return draft[:kept]

    def accept(self, token: int) -> None:
        """Advance the grammar past ``token`` (the sampler graph picked it under its mask)."""
        if not self.grammar.accept(token):
            raise EngineError(f"the grammar engine refused token {token}, which the sampler picked under "
                              f"its own mask: a bug, please report it")
