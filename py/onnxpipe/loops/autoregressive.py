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

from ..search.options import SearchOptions
from .base import LoopStrategy


@dataclass
class Timing:
    prefill_s: float = 0.0
    decode_s: float = 0.0
    decode_tokens: int = 0
    marks: list = field(default_factory=list)

    @property
    def prefill_ms(self) -> float:
        return self.prefill_s * 1000.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else 0.0


class Autoregressive(LoopStrategy):
    name = "autoregressive"
    supplies = ("input_ids", "generated_ids")
    reads = ("logits",)
    makes_tokens = True

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

    def run(self, history: list[int], new_ids: list[int]) -> Iterator[tuple[int, str | None]]:
        """Feed ``new_ids`` after ``history`` (ids already in the state), then generate.

        ``history`` is extended in place with every id the state has taken in, so a caller
        that stops early still holds a history that matches the state.
        """
        executor, options, timing, extra = self.executor, self.options, self.timing, self.extra
        generated: list[int] = []
        budget = options.max_new_tokens if options.max_new_tokens is not None else options.max_length
        produced = 0
        start = time.perf_counter()
        penalty_ids = getattr(executor.plugin, "penalty_ids", None)
        if executor.has_phase("init"):
            executor.run_phase("init", {**extra, "input_ids": (new_ids, (1, len(new_ids)))})
        feed = new_ids
        while True:
            outs = executor.run_phase("step", {**extra, "input_ids": (feed, (1, len(feed)))},
                                      new_length=len(feed))
            history.extend(feed)
            token = self.sampler(outs["logits"], penalty_ids(history, generated) if penalty_ids else history,
                                 start=not generated)
            produced += 1
            now = time.perf_counter()
            if produced == 1:
                timing.prefill_s = now - start
            else:
                timing.decode_s += now - start
                timing.decode_tokens += 1
            start = now
            finish = None
            if token in self.stop and len(history) + 1 > options.min_length:
                finish = "stop"
            elif produced >= budget or len(history) + 1 >= options.max_length:
                finish = "length"
            generated.append(token)
            if finish and executor.has_phase("final"):
                self.final_outputs = executor.run_phase(
                    "final", {**extra, "generated_ids": (generated, (1, len(generated)))})
            yield token, finish
            if finish:
                return
            feed = [token]
