"""Beam search, as transformers' ``generate(num_beams=...)`` does it, token for token.

The decoder runs with batch = num_beams (the prompt once, at batch 1); each step one small graph
(ops/sampler.py ``beam_graph``) turns every beam's logits into log-probabilities, applies the
masks and the repetition penalty, adds the beam's score and returns the best
K = max(2, 1 + number of end ids) * num_beams continuations over all beams: 2K numbers reach
Python, never the logits. The bookkeeping here is transformers' (``_beam_search``): the best
num_beams continuations that did not end keep running; the ones among the first num_beams that
ended (an end id, or the length) join the finished beams with score / new_length **
length_penalty; ``early_stopping`` decides when to stop. Then every state component gathers
its rows by the beams' sources, inside the engine (ops/kv.py ``gather_batch_many_graph``).

Scores are float32 where transformers computes them in float32, so the order of candidates is
the same up to exact ties. The state is left empty afterwards (the beams' caches are not the
returned sequence's): a chat that continues runs its whole prompt again.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass

from ..errors import ConfigError, InputError
from ..ops import sampler as graphs
from . import masks
from .options import SearchOptions
from .sampler import penalty_rows

_FINISHED_FILLER = -1.0e9   # transformers' score of a finished slot not filled yet


def _f32(value: float) -> float:
    return array("f", [value])[0]


@dataclass
class Beam:
    """One hypothesis: the new tokens and their summed log-probability (length-normalised once
    finished)."""
    tokens: list[int]
    score: float
    source: int = 0            # the running beam it continues (its row in the state)
    finish_reason: str | None = None

    def to_dict(self, text: str | None = None) -> dict:
        out = {"tokens": self.tokens, "score": round(self.score, 6), "finish_reason": self.finish_reason}
        if text is not None:
            out["text"] = text
        return out


def unsupported(executor, extra: dict | None = None) -> str | None:
    """Why this pipeline can't run beam search, or None."""
    why = executor.cannot_reorder()
    if why:
        return why
    if executor.plugin is not None:
        return "the bundle's plugin hooks see one sequence at a time"
    if executor.has_phase("final"):
        return "the final flow phase takes one generated sequence"
    if extra:
        return f"the pipeline inputs {', '.join(sorted(extra))} are given for one sequence"
    return None


def check_state(spec, executor, file: str) -> None:
    """Load-time: pipeline.json asks for beams, so the pipeline must be able to run them."""
    if spec.generation.loop != "autoregressive" or spec.generation.sampling.num_beams <= 1:
        return
    why = unsupported(executor)
    if why:
        raise ConfigError(f"beam search (num_beams {spec.generation.sampling.num_beams}) needs every "
                          f"state row reordered per beam, but {why}: set num_beams to 1",
                          file=file, path="$.generation.sampling.num_beams")


class BeamSearch:
    def __init__(self, executor, sampler, options: SearchOptions, stop: frozenset[int], timing, extra=None):
        why = unsupported(executor, extra)
        if why:
            raise InputError(f"beam search (num_beams={options.num_beams}) can't run here: {why}; "
                             f"call with num_beams=1")
        self.executor = executor
        self.backend = sampler.backend
        self.options = options
        self.vocab = sampler.vocab
        self.suppress = sampler.suppress
        self.stop = stop
        self.ends = tuple(sorted(i for i in stop if self.vocab is None or i < self.vocab))
        self.timing = timing
        self.extra = extra or {}
        self.penalty = options.repetition_penalty != 1.0
        self.with_bans = bool(options.suppress_tokens or options.suppress_tokens_at_start
                              or options.no_repeat_ngram_size or options.min_length or options.min_new_tokens)
        self.graph = self.backend.open_graph(
            graphs.beam_graph(sampler.dtype, self.penalty, sampler.rank, self.with_bans), sampler.provider)
        self.width = max(2, 1 + len(stop)) * options.num_beams   # candidates kept per step

    # ---- one step ------------------------------------------------------------------------------

    def _bans(self, ids: list[int], new: int, start: bool) -> list[int]:
        o = self.options
        banned = list(self.suppress[start])   # the sampler's: ids past the vocabulary left out
        if masks.ends_masked(o, len(ids), new):
            banned += self.ends
        if o.no_repeat_ngram_size:
            banned += masks.repeated_ngram_ids(ids, o.no_repeat_ngram_size)
        return banned

    def _candidates(self, logits, rows: list[list[int]], scores: list[float], new: int) -> list[tuple[float, int]]:
        """(score, flat index) of the best continuations of ``rows`` (each beam's whole ids)."""
        b, count = self.backend, len(rows)
        vocab = self.vocab or b.shape(logits)[-1]
        feeds = {"logits": logits, "scores": b.tensor(scores, "float32", (count,)),
                 "k": b.tensor([min(self.width, count * vocab)], "int64", (1,))}
        made = [feeds["scores"], feeds["k"]]
        if self.penalty:
            padded, shape = penalty_rows(rows)
            made += [b.tensor([self.options.repetition_penalty], "float32", (1,)),
                     b.tensor(padded, "int64", shape)]
            feeds["penalty"], feeds["prev_tokens"] = made[-2], made[-1]
        if self.with_bans:
            bans = [self._bans(r, new, new == 0) for r in rows]
            width = max(1, max(len(x) for x in bans))
            ids = [v for x in bans for v in x + [0] * (width - len(x))]
            add = [v for x in bans for v in [-float("inf")] * len(x) + [0.0] * (width - len(x))]
            made += [b.tensor(ids, "int64", (count, width)), b.tensor(add, "float32", (count, width))]
            feeds["ban_ids"], feeds["ban_add"] = made[-2], made[-1]
        out = b.run(self.graph, feeds, ["top_scores", "top_index"])
        top, index = b.to_list(out["top_scores"]), b.to_list(out["top_index"])
        b.dispose_many(made + [out["top_scores"], out["top_index"]])
        return list(zip(top, index))

    # ---- the search ----------------------------------------------------------------------------

    def run(self, history: list[int], new_ids: list[int]) -> list[Beam]:
        """Beam search after ``history`` (ids the state holds) + ``new_ids``; the finished beams,
        best first, ``num_return_sequences`` of them. The state is emptied at the end."""
        executor, o = self.executor, self.options
        prompt = history + new_ids
        limit = o.max_length if o.max_new_tokens is None else min(o.max_length, len(prompt) + o.max_new_tokens)
        try:
            return self._search(prompt, new_ids, limit)
        finally:
            executor.reset()
            history.clear()

    def _search(self, prompt: list[int], new_ids: list[int], limit: int) -> list[Beam]:
        executor, o, timing = self.executor, self.options, self.timing
        beams, vocab = o.num_beams, None
        start = time.perf_counter()
        if executor.has_phase("init"):
            executor.run_phase("init", {**self.extra, "input_ids": (new_ids, (1, len(new_ids)))})
        outs = executor.run_phase("step", {**self.extra, "input_ids": (new_ids, (1, len(new_ids)))},
                                  new_length=len(new_ids))
        running = [Beam([], 0.0)]
        finished: list[Beam] = []
        improvable = True   # transformers' is_early_stop_heuristic_unsatisfied
        new = 0
        while True:
            cands = self._candidates(outs["logits"], [prompt + r.tokens for r in running],
                                     [r.score for r in running], new)
            vocab = vocab or self.vocab or self.backend.shape(outs["logits"])[-1]
            if beams > vocab:   # the first step could not fill the beams
                raise InputError(f"num_beams ({beams}) is more than the vocabulary ({vocab} tokens)")
            length = len(prompt) + new + 1   # ids once this step's token is appended
            chosen = []
            for score, flat in cands:
                beam, token = divmod(flat, vocab)
                ended = token in self.stop or length >= limit
                chosen.append((Beam(running[beam].tokens + [token], score, beam,
                                    ("stop" if token in self.stop else "length") if ended else None)))
            # the best num_beams that did not end run on; ended ones only fill up, their score
            # pushed down by 1e9 as transformers does
            order = sorted(range(len(chosen)), key=lambda j: (chosen[j].finish_reason is not None, -chosen[j].score))
            running = [chosen[j] if not chosen[j].finish_reason else
                       Beam(chosen[j].tokens, _f32(chosen[j].score + _FINISHED_FILLER), chosen[j].source)
                       for j in order[:beams]]
            finished = self._finish(finished, chosen[:beams], new + 1, improvable)
            start = timing.count(start, new == 0)
            new += 1
            improvable = improvable and self._improvable(running, finished, new, len(prompt), limit)
            full = len(finished) == beams and o.early_stopping is True
            if not improvable or full or all(c.finish_reason for c in chosen):
                break
            executor.reorder([r.source for r in running])
            outs = executor.run_phase("step", {**self.extra, "input_ids": ([r.tokens[-1] for r in running],
                                                                          (beams, 1))},
                                      new_length=1, batch=beams)
        return finished[:o.num_return_sequences]

    def _finish(self, finished: list[Beam], top: list[Beam], new: int, improvable: bool) -> list[Beam]:
        """``finished`` with the ended beams among ``top`` (the best num_beams candidates) added,
        length-normalised, the best num_beams kept."""
        o = self.options
        if not improvable or (len(finished) == o.num_beams and o.early_stopping is True):
            return finished
        norm = _f32(new ** o.length_penalty)
        ended = [Beam(c.tokens, _f32(c.score / norm), c.source, c.finish_reason) for c in top if c.finish_reason]
        merged = sorted(finished + ended, key=lambda c: -c.score)   # stable: earlier ones first on ties
        return merged[:o.num_beams]

    def _improvable(self, running: list[Beam], finished: list[Beam], new: int, prompt: int, limit: int) -> bool:
        """transformers' heuristic: could the best running beam still beat the worst finished one?"""
        o = self.options
        if len(finished) < o.num_beams:
            worst = _FINISHED_FILLER
        else:
            worst = min(c.score for c in finished)
        best_length = limit - prompt if o.early_stopping == "never" and o.length_penalty > 0 else new
        best = _f32(running[0].score / _f32(best_length ** o.length_penalty))
        return best > worst
