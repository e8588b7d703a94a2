"""Pick the next token with a small ONNX graph on the engine: logits never reach Python.

``Sampler`` (one per call, from ``LoadedPipeline.sampler(options)``) chooses the strategy in
one place, ``_open``: ops/sampler.py's greedy or sampling graph. Each call sends the logits
handle plus a few scalars (a uniform draw from a seeded Python RNG, so the same seed gives the
same tokens on every engine) and reads back one token id. ``rows`` picks one token per position
of a speculative pass; each row takes the next uniform in the same order one-token calls would,
and ``unread`` hands back the ones whose positions were discarded, so a seed gives the same
draws whether tokens come one by one or verified in a batch.
"""

from __future__ import annotations

import random

from ..ops import sampler as graphs
from .options import SearchOptions



def penalty_rows(histories: list[list[int]]) -> tuple[list[int], tuple[int, int]]:
    """The repetition penalty's ``prev_tokens`` (flat, shape [rows, width]) for these ids.

    Negative ids are left out: they are placeholders a processor writes into the prompt (an
    image's rows, onnxruntime-genai's phi3v), never sampled, and an ONNX gather would read them
    from the end of the vocabulary. Short rows repeat their first id (a repeat counts once).
    """
    rows = [[t for t in h if t >= 0] or [0] for h in histories]
    width = max(len(r) for r in rows)
    return [v for r in rows for v in r + [r[0]] * (width - len(r))], (len(rows), width)

class Sampler:
    def __init__(self, backend, provider: str, options: SearchOptions, logits_info, vocab: int | None = None):
        """``vocab``: the logits' width where their shape leaves it symbolic (read from the graph)."""
        self.backend = backend
        self.options = options
        self.rank = len(logits_info.shape)
        self.vocab = logits_info.shape[-1] if isinstance(logits_info.shape[-1], int) else vocab
        penalty = options.repetition_penalty != 1.0
        self.penalty = penalty
        self.provider = provider
        self.dtype = logits_info.dtype
        self._graphs: dict[tuple[bool, bool, bool], object] = {}
        self.graph = self._graph(False, False, False)
        # suppressed ids: one graph with a suppress_ids input, fed the list for this position
        # ids past the vocabulary can never be picked: left out, as transformers' SuppressTokens
        # processors do (a mask over the vocabulary), not refused
        always, at_start = (tuple(i for i in getattr(options, name) if self.vocab is None or i < self.vocab)
                            for name in ("suppress_tokens", "suppress_tokens_at_start"))
        self.suppress = {True: tuple(dict.fromkeys(always + at_start)), False: always}
        self._suppress_ids: dict[tuple, object] = {}
        self.rng = random.Random(options.seed)
        self._unread: list[float] = []     # draws handed back by ``unread``, used first
        self._last_draws: list[float] = []
        self.fixed: dict | None = None

    @property
    def suppress_graph(self):
        """The one-token graph with a suppress_ids input, once a call needed it (else None)."""
        return self._graphs.get((True, False, False))

    def _graph(self, with_suppress: bool, every_position: bool, with_allowed: bool):
        """The greedy or sampling graph with these inputs, opened once per sampler."""
        key = (with_suppress, every_position, with_allowed)
        if key not in self._graphs:
            build = graphs.sampling_graph if self.options.do_sample else graphs.greedy_graph
            self._graphs[key] = self.backend.open_graph(
                build(logits_dtype=self.dtype, with_penalty=self.penalty, logits_rank=self.rank,
                      with_suppress=with_suppress, every_position=every_position,
                      with_allowed=with_allowed), self.provider)
        return self._graphs[key]

    def _draw(self, count: int) -> list[float]:
        draws = self._unread[:count]
        del self._unread[:count]
        draws += [self.rng.random() for _ in range(count - len(draws))]
        self._last_draws = draws
        return draws

    def unread(self, count: int) -> None:
        """Hand back the last ``count`` draws of the latest call: the next calls take them first."""
        if count > 0 and self.options.do_sample:
            self._unread[:0] = self._last_draws[len(self._last_draws) - count:]

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

    def _suppressed(self, start: bool, masked: tuple[int, ...] = ()):
        """The suppress_ids tensor (or None) for the first new token or a later one, plus
        ``masked`` ids (end ids under the minimum length, repeated n-grams: search/masks.py)."""
        ids = self.suppress[start]
        if masked:
            ids = tuple(dict.fromkeys(ids + masked))
        if not ids:
            return None
        key = (start, masked)
        if key not in self._suppress_ids:
            if len(self._suppress_ids) > 64:   # n-gram bans change every step: keep only a few
                self.backend.dispose_many([t for k, t in self._suppress_ids.items() if k[1]])
                self._suppress_ids = {k: t for k, t in self._suppress_ids.items() if not k[1]}
            self._suppress_ids[key] = self.backend.tensor(list(ids), "int64", (len(ids),))
        return self._suppress_ids[key]

    def __call__(self, logits, history: list[int], start: bool = False, masked: tuple[int, ...] = (),
                 allowed=None) -> int:
        """The next token id given ``logits`` (engine handle) and all ids so far; ``start``:
        this is the call's first new token (``suppress_tokens_at_start`` apply); ``masked``:
        more ids not to pick this time; ``allowed``: an engine tensor uint32[1, ceil(V / 32)],
        the grammar's allowed-token bitmask (ops/sampler.py), or None."""
        b = self.backend
        if self.fixed is None:
            self.fixed = self._fixed_inputs(logits)
        feeds = dict(self.fixed)
        feeds["logits"] = logits
        if self.options.do_sample:
            feeds["uniform"] = b.tensor(self._draw(1), "float32", (1,))
        if self.penalty:
            seen, shape = penalty_rows([history])
            feeds["prev_tokens"] = b.tensor(seen, "int64", shape)
        suppress = self._suppressed(start, masked)
        if suppress is not None:
            feeds["suppress_ids"] = suppress
        if allowed is not None:
            feeds["allowed"] = allowed
        graph = self._graph(suppress is not None, False, allowed is not None)
        out = b.run(graph, feeds, ["next_tokens"])["next_tokens"]
        token = b.to_list(out)[0]
        b.dispose(out)
        return token

    def rows(self, logits, histories: list[list[int]], allowed=None) -> list[int]:
        """One token per position of ``logits`` [1, S, V] (S == len(histories)); row i sees
        ``histories[i]`` for the repetition penalty and row i of ``allowed`` (uint32[S, W], a
        grammar's bitmask per position, or None). Never a call's first token (no
        ``suppress_tokens_at_start``)."""
        b = self.backend
        if self.fixed is None:
            self.fixed = self._fixed_inputs(logits)
        count = len(histories)
        feeds = dict(self.fixed)
        feeds["logits"] = logits
        if self.options.do_sample:
            feeds["uniform"] = b.tensor(self._draw(count), "float32", (count,))
        if self.penalty:
            padded, shape = penalty_rows(histories)
            feeds["prev_tokens"] = b.tensor(padded, "int64", shape)
        suppress = self._suppressed(False)
        if suppress is not None:
            feeds["suppress_ids"] = suppress
        if allowed is not None:
            feeds["allowed"] = allowed
        out = b.run(self._graph(suppress is not None, True, allowed is not None), feeds,
                    ["next_tokens"])["next_tokens"]
        tokens = b.to_list(out)
        b.dispose(out)
        return tokens
