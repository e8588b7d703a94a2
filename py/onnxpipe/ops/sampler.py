"""Next-token selection as small ONNX graphs, so logits never leave the engine.

Each factory returns ONNX model bytes (cached per argument tuple) that the backend opens as a
session on the same execution provider as the model that made the logits. One int64 token id
per row comes back to Python.

Inputs (``B`` batch, ``S`` positions, ``V`` vocabulary):

- ``logits``: [B, S, V] (``logits_rank=3``; the LAST position is used, so S may be 1 or the
  prompt length) or [B, V] (``logits_rank=2``), dtype float32 or float16. With
  ``every_position`` (rank 3 only) each of the B x S positions is a row of its own, in order:
  a speculative pass picks one token per verified position at once.
- ``penalty`` f32[1] and ``prev_tokens`` int64[B, N] (N >= 1), when ``with_penalty``; a row
  with fewer ids can repeat one of them (duplicates count once).
- ``suppress_ids`` int64[M] (M >= 1), when ``with_suppress``: ids no row may pick (the same
  for every row; duplicates are harmless).
- ``allowed`` uint32[B, W] (W = ceil(V / 32)), when ``with_allowed``: each row's allowed-token
  bitmask, bit ``t % 32`` of word ``t // 32`` set where token t may be picked (XGrammar's
  token bitmask, read as unsigned). Bits past V are ignored.
- sampling only: ``temperature`` f32[1] (> 0; use the greedy graph for temperature 0),
  ``top_k`` int64[1] (1..V; V or any value < 1 means no top-k; above V counts as V),
  ``top_p`` f32[1] (>= 1: off), ``min_p`` f32[1] (0: off), and ``uniform`` f32[B]: one
  number in [0, 1) per row drawn by the caller's seeded Python RNG, so one seed gives the
  same tokens on every engine.

Output: ``next_tokens`` int64[B].

Semantics, per row (tests/py/ops/reference_sampler.py implements them in pure Python, the tests' oracle):

1. x = logits at the last position, cast to float32.
2. Repetition penalty, for each distinct id t in prev_tokens: x[t] -> x[t] / penalty if
   x[t] > 0 else x[t] * penalty (transformers' RepetitionPenaltyLogitsProcessor).
   Allowed bitmask: x[t] -> -inf where t's bit is clear (a grammar's mask, applied as
   XGrammar's apply_token_bitmask_inplace does). Suppression: x[t] -> -inf for each t in
   suppress_ids (transformers' SuppressTokens processors); where that would leave a row of
   the allowed bitmask nothing (a grammar that can only end, with end ids suppressed under
   min_length), the row keeps the bitmask alone: a pick never leaves the grammar.
   Greedy stops here: the token is argmax(x), the lowest index on ties.
3. TopK k: the k largest x, sorted descending, the lower index first on ties.
4. Divide those k values by temperature (after TopK, which is cheaper and gives the same order
   except for ties that rounding would create) and take their softmax p.
5. min_p: keep position j if p[j] >= min_p * p[0] (min_p is clamped to <= 1).
6. top_p: keep position j if the exclusive cumulative sum of p before j is < top_p
   (top_p >= 1 keeps every position). Position 0 is always kept.
7. w = p where kept else 0; c = inclusive cumsum of w; choice = the number of positions with
   c <= uniform * c[-1], clamped to m - 1, where m = the number of positions with w > 0 (the
   clamp only acts when uniform * c[-1] rounds up to c[-1]; it never picks a discarded token).
   The result is the token index at position ``choice``. Dividing w by c[-1] (renormalizing)
   is folded into scaling uniform by c[-1].

The graph and the reference agree exactly except where uniform (or top_p, min_p) lies within
float32 rounding of a boundary. Cost per call: one TopK over V, plus a few passes over k.
For k > 256 (no top-k included) only the top 257 are sorted, with the softmax normalizer
(and the mass min_p keeps) summed over all of the top k unsorted. The full sort of the top k
runs only when the kept tokens reach past the top 257 and either top_p < 1 or uniform lands
past them (a flat distribution); it costs ~6 ms at V = 49152 and ~22 ms at V = 151936.
"""

from __future__ import annotations

import math
from functools import lru_cache

from .proto import Graph

__all__ = ["beam_graph", "greedy_graph", "sampling_graph"]

_LOGITS_DTYPES = ("float32", "float16")
_INT64_MAX = 2**63 - 1
# top_p is raised to at least this, so position 0 (exclusive cumsum exactly 0) always stays;
# every later position has a cumsum >= p[0] >= 1/V, far above it.
_TOP_P_FLOOR = 1e-30
# For k above this, sampling first looks at the top _CANDIDATES + 1 tokens only.
_CANDIDATES = 256


def _check(logits_dtype: str, logits_rank: int, every_position: bool = False) -> None:
    if every_position and logits_rank != 3:
        raise ValueError("every_position needs logits_rank 3 ([B, S, V])")
    if logits_dtype not in _LOGITS_DTYPES:
        raise ValueError(f"logits_dtype: expected one of {_LOGITS_DTYPES}, got {logits_dtype!r}")
    if logits_rank not in (2, 3):
        raise ValueError(f"logits_rank: expected 3 ([B, S, V]) or 2 ([B, V]), got {logits_rank!r}")


def _scores(g: Graph, logits_dtype: str, logits_rank: int, with_penalty: bool,
            with_suppress: bool = False, every_position: bool = False, with_allowed: bool = False) -> str:
    """Declare logits (+ penalty, allowed bitmask and suppression inputs); return the float32
    [B, V] scores."""
    dims = ["batch", "seq", "vocab"] if logits_rank == 3 else ["batch", "vocab"]
    x = g.input("logits", logits_dtype, dims)
    if every_position:
        g.const("rows_lead", [-1], "int64", [1])
        shape = g.node("Concat", ["rows_lead", g.node("Shape", [x], "rows_vocab", start=-1)], "rows_shape", axis=0)
        x = g.node("Reshape", [x, shape], "row_logits")
    elif logits_rank == 3:
        g.const("last", [-1], "int64", [])
        x = g.node("Gather", [x, "last"], "last_logits", axis=1)
    if logits_dtype != "float32":
        x = g.node("Cast", [x], "logits_f32", to=1)
    if with_penalty:
        x = _penalize_graph(g, x)
    if with_allowed:
        x = _allowed_graph(g, x)
    if with_suppress:
        suppressed = _suppress_graph(g, x)
        if not with_allowed:
            return suppressed
        # a row the suppression emptied keeps the grammar's mask alone
        g.const("alw_neg_inf", [-math.inf], "float32", [])
        best = g.node("ReduceMax", [suppressed], "alw_row_best", axes=[1], keepdims=1)
        empty = g.node("Equal", [best, "alw_neg_inf"], "alw_row_empty")
        x = g.node("Where", [empty, x, suppressed], "alw_suppressed")
    return x


def _allowed_graph(g: Graph, x: str) -> str:
    """x with -inf where the row's allowed bitmask has a clear bit."""
    g.input("allowed", "uint32", ["batch", "words"])
    g.const("alw_axis1", [1], "int64", [1])
    g.const("alw_last", [2], "int64", [1])
    # bit j of a word: (word << (31 - j)) >> 31 (BitShift is opset 11; BitwiseAnd needs 18)
    g.const("alw_up", [31 - j for j in range(32)], "uint32", [32])
    g.const("alw_down", [31], "uint32", [])
    g.const("alw_flat", [0, -1], "int64", [2])
    g.const("alw_start", [0], "int64", [1])
    g.const("alw_minus_inf", [-math.inf], "float32", [])
    words = g.node("Unsqueeze", ["allowed", "alw_last"], "alw_words")            # [B, W, 1]
    raised = g.node("BitShift", [words, "alw_up"], "alw_raised", direction="LEFT")
    bits = g.node("BitShift", [raised, "alw_down"], "alw_bits", direction="RIGHT")   # [B, W, 32]
    flat = g.node("Reshape", [g.node("Cast", [bits], "alw_bool", to=9), "alw_flat"], "alw_flat_bits")
    vocab = g.node("Shape", [x], "alw_vocab", start=-1)
    keep = g.node("Slice", [flat, "alw_start", vocab, "alw_axis1"], "alw_keep")   # [B, V]
    return g.node("Where", [keep, x, "alw_minus_inf"], "allowed_scores")


def _suppress_graph(g: Graph, x: str) -> str:
    """x with -inf scattered at suppress_ids in every row."""
    g.input("suppress_ids", "int64", ["suppressed"])
    g.const("sup_axis0", [0], "int64", [1])
    g.const("sup_neg_inf", [-math.inf], "float32", [1, 1])
    row = g.node("Unsqueeze", ["suppress_ids", "sup_axis0"], "sup_row")
    shape = g.node("Concat", [g.node("Shape", [x], "sup_batch", end=1),
                              g.node("Shape", ["suppress_ids"], "sup_count")], "sup_shape", axis=0)
    ids = g.node("Expand", [row, shape], "sup_ids")
    neg = g.node("Expand", ["sup_neg_inf", shape], "sup_values")
    return g.node("ScatterElements", [x, ids, neg], "suppressed", axis=1)


def _penalize_graph(g: Graph, x: str) -> str:
    g.input("penalty", "float32", [1])
    g.input("prev_tokens", "int64", ["batch", "prev"])
    g.const("pen_zero", [0.0], "float32", [])
    # Gather, penalize, scatter back: duplicate ids write the same value, so order is moot.
    seen = g.node("GatherElements", [x, "prev_tokens"], "seen", axis=1)
    positive = g.node("Greater", [seen, "pen_zero"], "seen_positive")
    shrunk = g.node("Div", [seen, "penalty"], "seen_div")
    grown = g.node("Mul", [seen, "penalty"], "seen_mul")
    penalized = g.node("Where", [positive, shrunk, grown], "seen_penalized")
    return g.node("ScatterElements", [x, "prev_tokens", penalized], "penalized", axis=1)


def greedy_graph(logits_dtype: str = "float32", with_penalty: bool = False,
                 logits_rank: int = 3, with_suppress: bool = False, every_position: bool = False,
                 with_allowed: bool = False) -> bytes:
    """Argmax over the last position (after the optional repetition penalty, allowed bitmask
    and suppression).

    Inputs: ``logits`` (+ ``penalty``, ``prev_tokens``; + ``suppress_ids``; + ``allowed``).
    Output: ``next_tokens`` int64[B].
    """
    _check(logits_dtype, logits_rank, every_position)
    return _greedy_graph(logits_dtype, bool(with_penalty), int(logits_rank), bool(with_suppress),
                         bool(every_position), bool(with_allowed))


@lru_cache(maxsize=None)
def _greedy_graph(logits_dtype: str, with_penalty: bool, logits_rank: int, with_suppress: bool,
                  every_position: bool, with_allowed: bool) -> bytes:
    g = Graph("greedy")
    x = _scores(g, logits_dtype, logits_rank, with_penalty, with_suppress, every_position, with_allowed)
    g.node("ArgMax", [x], "next_tokens", axis=-1, keepdims=0, select_last_index=0)
    g.output("next_tokens", "int64", ["batch"])
    return g.to_bytes()


def _weights(g: Graph, p: str, pre: str) -> tuple[str, str, str]:
    """Steps 5-6 on sorted probabilities ``p`` [B, n]: names of keep, w and c (all [B, n])."""
    p0 = g.node("Slice", [p, "start0", "one_i", "axis1"], pre + "p_max")
    floor = g.node("Mul", [p0, "min_p_le1"], pre + "p_floor")
    keep_min = g.node("GreaterOrEqual", [p, floor], pre + "keep_min_p")
    before = g.node("CumSum", [p, "axis1"], pre + "cum_before", exclusive=1)
    keep_top = g.node("Less", [before, "top_p_pos"], pre + "keep_top_p")
    keep = g.node("And", [keep_min, keep_top], pre + "keep")
    w = g.node("Where", [keep, p, "zero_f"], pre + "weights")
    return keep, w, g.node("CumSum", [w, "axis1"], pre + "cum")


def _pick(g: Graph, w: str, c: str, idx: str, total: str, pre: str) -> str:
    """Step 7: the token [B] where c passes uniform * total (the kept mass, [B, 1])."""
    target = g.node("Mul", ["uniform_col", total], pre + "target")
    # Counts are summed as float32 (exact below 2**24): int64 ReduceSum is ~10x slower on CPU.
    below = g.node("Cast", [g.node("LessOrEqual", [c, target], pre + "below_b")], pre + "below", to=1)
    count = g.node("ReduceSum", [below, "axis1"], pre + "count", keepdims=1)
    positive = g.node("Cast", [g.node("Greater", [w, "zero_f"], pre + "pos_b")], pre + "pos", to=1)
    n_pos = g.node("ReduceSum", [positive, "axis1"], pre + "n_pos", keepdims=1)
    last_pos = g.node("Sub", [n_pos, "one_f"], pre + "last_pos")
    choice = g.node("Cast", [g.node("Min", [count, last_pos], pre + "choice_f")], pre + "choice", to=7)
    token = g.node("GatherElements", [idx, choice], pre + "token_col", axis=1)
    return g.node("Squeeze", [token, "axis1"], pre + "token")


def _last(g: Graph, value: str, out: str) -> str:
    return g.node("Slice", [value, "start_last", "end_max", "axis1"], out)


def _sorted_branch(x: str, pre: str) -> Graph:
    """A subgraph sampling from the full TopK k (sorted): exact for any k."""
    g = Graph(pre + "sorted")
    vals, idx = g.node("TopK", [x, "k"], [pre + "vals", pre + "idx"], axis=-1, largest=1, sorted=1)
    scaled = g.node("Div", [vals, "temperature"], pre + "scaled")
    p = g.node("Softmax", [scaled], pre + "probs", axis=-1)
    _, w, c = _weights(g, p, pre)
    token = _pick(g, w, c, idx, _last(g, c, pre + "cum_last"), pre)
    g.output(token, "int64", ["batch"])
    return g


def _identity_branch(value: str, out: str, dtype: str, dims: list) -> Graph:
    g = Graph(out + "_branch")
    g.node("Identity", [value], out)
    g.output(out, dtype, dims)
    return g


def _candidates_branch(x: str) -> Graph:
    """A subgraph for k > _CANDIDATES: sort only the top _CANDIDATES + 1 positions.

    The choice is decided among them when the kept prefix ends inside them, or when top_p is
    off (the kept set is then {p >= min_p * p[0]}, whose mass needs no sort) and the target
    falls inside them. Otherwise (a flat distribution) the full top k is sorted.
    """
    g = Graph("candidates")
    # The softmax normalizer sums over the whole top k; with k == V that is all of x, unsorted.
    z_vals = g.node("If", [g.node("Equal", ["k", "vocab_size"], "k_is_vocab")], "z_vals",
                    then_branch=_identity_branch(x, "z_all", "float32", ["batch", "vocab"]),
                    else_branch=_topk_unsorted_branch(x))
    g.const("n_candidates", [_CANDIDATES + 1], "int64", [1])
    vals, idx = g.node("TopK", [x, "n_candidates"], ["c_vals", "c_idx"], axis=-1, largest=1, sorted=1)
    scaled = g.node("Div", [vals, "temperature"], "c_scaled")
    top = g.node("Slice", [scaled, "start0", "one_i", "axis1"], "c_top")
    z_exp = g.node("Exp", [g.node("Sub", [g.node("Div", [z_vals, "temperature"], "z_scaled"), top],
                                  "z_shift")], "z_exp")
    z = g.node("ReduceSum", [z_exp, "axis1"], "z", keepdims=1)
    p = g.node("Div", [g.node("Exp", [g.node("Sub", [scaled, top], "c_shift")], "c_exp"), z], "c_probs")
    keep, w, c = _weights(g, p, "c_")
    c_last = _last(g, c, "c_cum_last")
    # The kept set is a prefix: past the candidates only if the last candidate is kept.
    keep_last = _last(g, keep, "c_keep_last")
    reaches_past = g.node("And", [keep_last, "top_p_off"], "c_reaches_past")
    p_all = g.node("Div", [z_exp, z], "z_probs")
    min_p_kept = g.node("Where", [g.node("GreaterOrEqual", [p_all, "c_p_floor"], "z_keep"), p_all,
                                  "zero_f"], "z_weights")
    total_all = g.node("ReduceSum", [min_p_kept, "axis1"], "z_kept_mass", keepdims=1)
    total = g.node("Where", [reaches_past, total_all, c_last], "c_total")
    token = _pick(g, w, c, idx, total, "c_")
    inside = g.node("Less", ["c_target", c_last], "c_target_inside")
    decided = g.node("Or", [g.node("Not", [keep_last], "c_cut"),
                            g.node("And", ["top_p_off", inside], "c_inside_off")], "c_decided")
    all_decided = g.node("ReduceMin", [g.node("Cast", [decided], "c_decided_f", to=1)],
                         "c_all_decided", keepdims=0)
    g.node("If", [g.node("Less", [all_decided, "one_f"], "c_undecided")], "c_next_tokens",
           then_branch=_sorted_branch(x, "f_"),
           else_branch=_identity_branch(token, "c_chosen", "int64", ["batch"]))
    g.output("c_next_tokens", "int64", ["batch"])
    return g


def _topk_unsorted_branch(x: str) -> Graph:
    g = Graph("topk_unsorted")
    g.node("TopK", [x, "k"], ["z_topk", "z_topk_idx"], axis=-1, largest=1, sorted=0)
    g.output("z_topk", "float32", ["batch", "k"])
    return g


def sampling_graph(logits_dtype: str = "float32", with_penalty: bool = False,
                   logits_rank: int = 3, with_suppress: bool = False, every_position: bool = False,
                   with_allowed: bool = False) -> bytes:
    """Temperature / top-k / top-p / min-p sampling driven by a caller-drawn uniform.

    Inputs: ``logits``, ``temperature``, ``top_k``, ``top_p``, ``min_p``, ``uniform``
    (+ ``penalty``, ``prev_tokens``; + ``suppress_ids``; + ``allowed``). Output:
    ``next_tokens`` int64[B]. See the module docstring for the exact semantics.
    """
    _check(logits_dtype, logits_rank, every_position)
    return _sampling_graph(logits_dtype, bool(with_penalty), int(logits_rank), bool(with_suppress),
                           bool(every_position), bool(with_allowed))


@lru_cache(maxsize=None)
def _sampling_graph(logits_dtype: str, with_penalty: bool, logits_rank: int, with_suppress: bool,
                    every_position: bool, with_allowed: bool) -> bytes:
    g = Graph("sampling")
    x = _scores(g, logits_dtype, logits_rank, with_penalty, with_suppress, every_position, with_allowed)
    for name in ("temperature", "top_k", "top_p", "min_p"):
        g.input(name, "int64" if name == "top_k" else "float32", [1])
    g.input("uniform", "float32", ["batch"])
    g.const("one_i", [1], "int64", [1])
    g.const("one_f", [1.0], "float32", [1])
    g.const("zero_f", [0.0], "float32", [])
    g.const("axis1", [1], "int64", [1])
    g.const("start0", [0], "int64", [1])
    g.const("start_last", [-1], "int64", [1])
    g.const("end_max", [_INT64_MAX], "int64", [1])
    g.const("top_p_floor", [_TOP_P_FLOOR], "float32", [1])
    g.const("top_p_inf", [math.inf], "float32", [1])
    g.const("max_sorted", [_CANDIDATES], "int64", [1])

    vocab = g.node("Shape", [x], "vocab_size", start=-1)
    disabled = g.node("Less", ["top_k", "one_i"], "top_k_off")
    g.node("Where", [disabled, vocab, g.node("Min", ["top_k", vocab], "k_le_vocab")], "k")
    g.node("Min", ["min_p", "one_f"], "min_p_le1")
    off = g.node("GreaterOrEqual", ["top_p", "one_f"], "top_p_off")
    g.node("Where", [off, "top_p_inf", g.node("Max", ["top_p", "top_p_floor"], "top_p_ge_floor")],
           "top_p_pos")
    g.node("Unsqueeze", ["uniform", "axis1"], "uniform_col")
    g.node("If", [g.node("LessOrEqual", ["k", "max_sorted"], "k_small")], "next_tokens",
           then_branch=_sorted_branch(x, "s_"), else_branch=_candidates_branch(x))
    g.output("next_tokens", "int64", ["batch"])
    return g.to_bytes()


def beam_graph(logits_dtype: str = "float32", with_penalty: bool = False, logits_rank: int = 3,
               with_bans: bool = False) -> bytes:
    """One beam-search step: the best ``k`` (beam, token) continuations over all beams.

    Inputs: ``logits`` ([B, S, V], the last position used, or [B, V]), ``scores`` f32[B] (each
    beam's summed log-probability so far), ``k`` int64[1] (<= B * V); with ``with_penalty``
    ``penalty`` f32[1] and ``prev_tokens`` int64[B, N] (as the other graphs, but applied to
    log-probabilities, as transformers' beam search does); with ``with_bans`` ``ban_ids``
    int64[B, M] and ``ban_add`` f32[B, M] (0 or -inf, added at those ids: each row its own
    masked ids, a row with fewer padded with 0 additions).

    Outputs: ``top_scores`` f32[k], descending, and ``top_index`` int64[k]: beam * V + token.
    Per row: log_softmax of the float32 logits, penalty, bans, plus the beam's score (all float32,
    as transformers); ties keep the lower flat index first.
    """
    _check(logits_dtype, logits_rank)
    return _beam_graph(logits_dtype, bool(with_penalty), int(logits_rank), bool(with_bans))


@lru_cache(maxsize=None)
def _beam_graph(logits_dtype: str, with_penalty: bool, logits_rank: int, with_bans: bool) -> bytes:
    g = Graph("beam_step")
    x = _scores(g, logits_dtype, logits_rank, with_penalty=False)
    x = g.node("LogSoftmax", [x], "log_probs", axis=-1)
    if with_penalty:
        x = _penalize_graph(g, x)
    if with_bans:
        g.input("ban_ids", "int64", ["batch", "banned"])
        g.input("ban_add", "float32", ["batch", "banned"])
        x = g.node("ScatterElements", [x, "ban_ids", "ban_add"], "banned_log_probs", axis=1,
                   reduction="add")
    g.input("scores", "float32", ["batch"])
    g.input("k", "int64", [1])
    g.const("beam_axis1", [1], "int64", [1])
    g.const("beam_flat", [1, -1], "int64", [2])
    total = g.node("Add", [x, g.node("Unsqueeze", ["scores", "beam_axis1"], "scores_col")], "total")
    flat = g.node("Reshape", [total, "beam_flat"], "flat")
    vals, idx = g.node("TopK", [flat, "k"], ["top_row", "index_row"], axis=-1, largest=1, sorted=1)
    g.const("beam_axis0", [0], "int64", [1])
    g.node("Squeeze", [vals, "beam_axis0"], "top_scores")
    g.node("Squeeze", [idx, "beam_axis0"], "top_index")
    g.output("top_scores", "float32", ["k"])
    g.output("top_index", "int64", ["k"])
    return g.to_bytes()
