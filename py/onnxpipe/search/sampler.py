"""Pick the next token with a small ONNX graph on the engine: logits never reach Python.

``make_sampler`` chooses the strategy in one place; each call sends the logits handle plus
a few scalars (a uniform draw from a seeded Python RNG, so the same seed gives the same
tokens on every engine) and reads back one token id.
"""

from __future__ import annotations

import random

from ..ops import sampler as graphs
from ..errors import InputError
from .options import SearchOptions


class Sampler:
    def __init__(self, backend, provider: str, options: SearchOptions, logits_info):
        self.backend = backend
        self.options = options
        self.rank = len(logits_info.shape)
        self.vocab = logits_info.shape[-1] if isinstance(logits_info.shape[-1], int) else None
        penalty = options.repetition_penalty != 1.0
        self.penalty = penalty
        build = graphs.sampling_graph if options.do_sample else graphs.greedy_graph
        self.graph = backend.open_graph(
            build(logits_dtype=logits_info.dtype, with_penalty=penalty, logits_rank=self.rank), provider)
        # suppressed ids: one graph with a suppress_ids input, fed the list for this position
        start = tuple(dict.fromkeys(options.suppress_tokens + options.suppress_tokens_at_start))
        if self.vocab is not None and any(i >= self.vocab for i in start):
            raise InputError(f"suppress_tokens: {[i for i in start if i >= self.vocab][:5]} outside the "
                             f"vocabulary (0..{self.vocab - 1})")
        self.suppress = {True: start, False: tuple(options.suppress_tokens)}
        self.suppress_graph = backend.open_graph(
            build(logits_dtype=logits_info.dtype, with_penalty=penalty, logits_rank=self.rank,
                  with_suppress=True), provider) if start else None
        self._suppress_ids: dict[bool, object] = {}
        self.rng = random.Random(options.seed)
        self.fixed: dict | None = None

    def _fixed_inputs(self, logits) -> dict:
        o, b = self.options, self.backend
        fixed = {}
        if self.penalty:
            fixed["penalty"] = b.tensor([o.repetition_penalty], "float32", (1,))
        if o.do_sample:
            vocab = self.vocab or b.shape(logits)[-1]
            k = vocab if o.top_k <= 0 else min(o.top_k, vocab)
            fixed.update(temperature=b.tensor([o.temperature], "float32", (1,)),
                         top_k=b.tensor([k], "int64", (1,)),
                         top_p=b.tensor([o.top_p], "float32", (1,)),
                         min_p=b.tensor([o.min_p], "float32", (1,)))
        return fixed

    def _suppressed(self, start: bool):
        """(graph, suppress_ids tensor or None) for the first new token or a later one."""
        ids = self.suppress[start]
        if not ids:
            return self.graph, None
        if start not in self._suppress_ids:
            self._suppress_ids[start] = self.backend.tensor(list(ids), "int64", (len(ids),))
        return self.suppress_graph, self._suppress_ids[start]

    def __call__(self, logits, history: list[int], start: bool = False) -> int:
        """The next token id given ``logits`` (engine handle) and all ids so far; ``start``:
        this is the call's first new token (``suppress_tokens_at_start`` apply)."""
        b = self.backend
        if self.fixed is None:
            self.fixed = self._fixed_inputs(logits)
        feeds = dict(self.fixed)
        feeds["logits"] = logits
        if self.options.do_sample:
            feeds["uniform"] = b.tensor([self.rng.random()], "float32", (1,))
        if self.penalty:
            seen = history or [0]
            feeds["prev_tokens"] = b.tensor(seen, "int64", (1, len(seen)))
        graph, suppress = self._suppressed(start)
        if suppress is not None:
            feeds["suppress_ids"] = suppress
        out = b.run(graph, feeds, ["next_tokens"])["next_tokens"]
        token = b.to_list(out)[0]
        b.dispose(out)
        return token
