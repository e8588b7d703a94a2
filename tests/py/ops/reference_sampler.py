"""The sampler graphs' semantics in pure Python (ops/sampler.py's docstring, steps 1-7): the
tests' oracle for onnxpipe.ops.sampler, kept out of the product tree."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from itertools import accumulate
from typing import Sequence

from onnxpipe.ops.sampler import _TOP_P_FLOOR


def _f32(values: Sequence[float]) -> list[float]:
    """Round Python floats to the nearest float32 (double rounding is exact for + - * /)."""
    return array("f", values).tolist()


def allowed_ids(words: Sequence[int], vocab: int) -> list[bool]:
    """The allowed flag of each of ``vocab`` ids in one row of a uint32 bitmask (bit t % 32 of
    word t // 32; bits past ``vocab`` ignored)."""
    return [bool((int(words[t // 32]) >> (t % 32)) & 1) for t in range(vocab)]


def _penalize(x: list[float], penalty: float, prev_tokens: Sequence[int],
              suppress: Sequence[int] = (), allowed: Sequence[int] | None = None) -> list[float]:
    """Step 2: penalty, then the allowed bitmask (row words), then suppression; a row the
    suppression empties keeps the bitmask alone."""
    (penalty,) = _f32([penalty])
    ids = sorted(set(prev_tokens))
    new = _f32([x[t] / penalty if x[t] > 0 else x[t] * penalty for t in ids])
    for t, v in zip(ids, new):
        x[t] = v
    if allowed is not None:
        x = [v if ok else -math.inf for v, ok in zip(x, allowed_ids(allowed, len(x)))]
    masked = list(x)
    for t in suppress:
        masked[t] = -math.inf
    if allowed is not None and max(masked) == -math.inf:
        return x
    return masked


def reference_greedy_token(logits_row: Sequence[float], *, penalty: float = 1.0,
                           prev_tokens: Sequence[int] = (), suppress: Sequence[int] = (),
                           allowed: Sequence[int] | None = None) -> int:
    """Pure-Python greedy: argmax after the repetition penalty, the allowed bitmask (``allowed``:
    the row's uint32 words) and suppression, lowest index on ties."""
    x = _penalize(_f32(logits_row), penalty, prev_tokens, suppress, allowed)
    return max(range(len(x)), key=x.__getitem__)  # max keeps the first of equal keys


def reference_next_token(logits_row: Sequence[float], *, temperature: float, top_k: int,
                         top_p: float, min_p: float, uniform: float, penalty: float = 1.0,
                         prev_tokens: Sequence[int] = (), suppress: Sequence[int] = (),
                         allowed: Sequence[int] | None = None) -> int:
    """Pure-Python sampling with the module's exact semantics, for one row of logits.

    ``logits_row`` is the last position's logits (float16 inputs: pass their exact values).
    Arithmetic is float64 except where float32 rounding decides order (penalty); results can
    differ from the graph only when ``uniform`` sits within float32 rounding of a boundary.
    """
    x = _penalize(_f32(logits_row), penalty, prev_tokens, suppress, allowed)
    k = len(x) if top_k < 1 else min(int(top_k), len(x))
    # a stable sort, reversed, keeps the lower index first among equal values
    order = sorted(range(len(x)), key=x.__getitem__, reverse=True)[:k]
    temperature, min_p, top_p, uniform = _f32([temperature, min_p, top_p, uniform])
    scaled = _f32([x[i] / temperature for i in order])
    top = scaled[0]
    exps = [math.exp(v - top) for v in scaled]
    total = sum(exps)
    p = [e / total for e in exps]

    # min_p and top_p each keep a prefix of the sorted positions; position 0 always stays
    floor = min(min_p, 1.0) * p[0]
    top_p = max(top_p, _TOP_P_FLOOR)
    kept = 1
    for before, pj in zip(accumulate(p[:-1]), p[1:]):
        if pj < floor or (top_p < 1.0 and before >= top_p):
            break
        kept += 1
    positive = sum(1 for pj in p[:kept] if pj > 0)  # exp underflow can zero the tail
    c = list(accumulate(p[:kept]))
    choice = bisect_right(c, uniform * c[-1])  # the number of c values <= uniform * c[-1]
    return order[min(choice, positive - 1)]
