"""Sampler graphs: exact token ids on hand-built logits, and agreement with the pure-Python
reference on random ones (uniform values away from rounding boundaries)."""

import math
import random

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxpipe.ops import greedy_graph, sampling_graph
from tests.py.ops.reference_sampler import reference_greedy_token, reference_next_token

_SESSIONS = {}
F32_BELOW_ONE = float(np.nextafter(np.float32(1), np.float32(0)))  # 0.99999994


def _session(model_bytes):
    if model_bytes not in _SESSIONS:
        _SESSIONS[model_bytes] = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return _SESSIONS[model_bytes]


def _penalty_feeds(penalty, prev_tokens):
    if penalty is None:
        return {}
    return {"penalty": np.array([penalty], np.float32), "prev_tokens": np.array(prev_tokens, np.int64)}


def greedy(logits, *, dtype="float32", penalty=None, prev_tokens=None):
    logits = np.asarray(logits, dtype)
    graph = greedy_graph(dtype, penalty is not None, logits.ndim)
    feeds = {"logits": logits, **_penalty_feeds(penalty, prev_tokens)}
    return _session(graph).run(None, feeds)[0].tolist()


def sample(logits, uniform, *, dtype="float32", temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
           penalty=None, prev_tokens=None):
    logits = np.asarray(logits, dtype)
    graph = sampling_graph(dtype, penalty is not None, logits.ndim)
    feeds = {
        "logits": logits,
        "temperature": np.array([temperature], np.float32),
        "top_k": np.array([top_k], np.int64),
        "top_p": np.array([top_p], np.float32),
        "min_p": np.array([min_p], np.float32),
        "uniform": np.array(uniform, np.float32),
        **_penalty_feeds(penalty, prev_tokens),
    }
    (tokens,) = _session(graph).run(None, feeds)
    assert tokens.dtype == np.int64 and tokens.shape == (logits.shape[0],)
    return tokens.tolist()


# p = 0.3 at token 0, 0.5 at token 3, 0.2 at token 5; the rest ~1e-13
THREE = [math.log(0.3), -30.0, -30.0, math.log(0.5), -30.0, math.log(0.2)]
# two tied maxima at tokens 1 and 2: sorted order 1, 2, 0, 3; p = .4836, .4836, .0241, .0089
TIED = [2.0, 5.0, 5.0, 1.0]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("with_penalty", [False, True])
@pytest.mark.parametrize("rank", [2, 3])
def test_graphs_pass_the_onnx_checker(dtype, with_penalty, rank):
    for graph in (greedy_graph(dtype, with_penalty, rank), sampling_graph(dtype, with_penalty, rank)):
        onnx.checker.check_model(onnx.load_from_string(graph), full_check=True)


def test_graphs_are_cached_and_arguments_checked():
    assert sampling_graph() is sampling_graph("float32", False, 3)
    assert greedy_graph("float16") is greedy_graph("float16")
    with pytest.raises(ValueError, match="logits_dtype"):
        greedy_graph("int8")
    with pytest.raises(ValueError, match="logits_rank"):
        sampling_graph("float32", False, 4)


def test_greedy_ties_pick_the_lowest_index():
    assert greedy([[1.0, 3.0, 3.0, 2.0, 0.5]]) == [1]
    assert greedy([[1.0, 3.0, 3.0, 2.0, 0.5], [0.0, 0.0, 0.0, 0.0, 1.0]]) == [1, 4]
    assert greedy([[0.0, 0.0, 0.0]]) == [0]


def test_greedy_uses_the_last_position():
    logits = [[[9.0, 0.0, 0.0], [0.0, 0.0, 7.0]], [[0.0, 0.0, 9.0], [0.0, 7.0, 0.0]]]
    assert greedy(logits) == [2, 1]
    assert greedy(logits, dtype="float16") == [2, 1]
    assert greedy([[[0.5, 0.25, 1.5]]], dtype="float16") == [2]


def test_greedy_repetition_penalty():
    row = [1.0, 3.0, 2.5, -1.0]
    assert greedy([row], penalty=2.0, prev_tokens=[[1]]) == [2]  # 3.0 -> 1.5
    assert greedy([row], penalty=2.0, prev_tokens=[[1, 2]]) == [1]  # 1.5 beats 1.25
    # negative logits are multiplied: -0.5 -> -1.0 ties token 0, which wins
    assert greedy([[-1.0, -0.5, -2.0]], penalty=2.0, prev_tokens=[[1]]) == [0]
    # a repeated id is penalized once: 3.0 -> 1.5 (not 0.375) still beats 1.4
    assert greedy([[1.0, 3.0, 1.4]], penalty=2.0, prev_tokens=[[1, 1, 1]]) == [1]
    # per-row prev_tokens, rank 3, float16
    logits = [[[1.0, 3.0, 2.5, -1.0]], [[1.0, 3.0, 2.5, -1.0]]]
    assert greedy(logits, dtype="float16", penalty=2.0, prev_tokens=[[1, 1], [3, 0]]) == [2, 1]
    assert reference_greedy_token([1.0, 3.0, 1.4], penalty=2.0, prev_tokens=[1, 1, 1]) == 1


@pytest.mark.parametrize(
    "params,uniform,expected",
    [
        ({}, 0.1, 3), ({}, 0.6, 0), ({}, 0.9, 5), ({}, 0.0, 3),
        ({"top_k": 2}, 0.6, 3), ({"top_k": 2}, 0.7, 0), ({"top_k": 2}, 0.99, 0),
        ({"top_k": 1}, 0.99, 3), ({"top_k": 6}, 0.9, 5), ({"top_k": 100}, 0.9, 5), ({"top_k": -1}, 0.9, 5),
        ({"top_p": 0.6}, 0.6, 3), ({"top_p": 0.6}, 0.7, 0), ({"top_p": 0.6}, 0.99, 0),
        ({"top_p": 0.45}, 0.99, 3), ({"top_p": 0.0}, 0.99, 3), ({"top_p": 0.9}, 0.99, 5),
        ({"min_p": 0.5}, 0.7, 0), ({"min_p": 0.5}, 0.99, 0), ({"min_p": 0.7}, 0.99, 3),
        ({"min_p": 1.0}, 0.99, 3), ({"min_p": 5.0}, 0.99, 3), ({"min_p": 0.3}, 0.99, 5),
        ({"temperature": 0.5}, 0.6, 3), ({"temperature": 0.5}, 0.95, 5),  # p = .658 .237 .105
        ({"temperature": 2.0}, 0.45, 0),  # p = .416 .322 .263
        ({"temperature": 0.5, "top_k": 2, "top_p": 0.5}, 0.99, 3),
    ],
)
def test_sampling_hand_built(params, uniform, expected):
    assert sample([THREE], [uniform], **params) == [expected]
    assert sample([[THREE]], [uniform], **params) == [expected]  # rank 3, S = 1
    assert reference_next_token(THREE, uniform=uniform, **{
        "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, **params}) == expected


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(
    "params,uniform,expected",
    [
        ({}, 0.3, 1), ({}, 0.6, 2), ({}, 0.98, 0), ({}, 0.995, 3),
        ({"top_k": 2}, 0.3, 1), ({"top_k": 2}, 0.6, 2), ({"top_k": 3}, 0.995, 0),
        ({"min_p": 1.0}, 0.6, 2),  # ties with the maximum survive min_p = 1
        ({"top_p": 0.4}, 0.99, 1),
    ],
)
def test_sampling_ties_follow_the_lower_index(dtype, params, uniform, expected):
    assert sample([TIED], [uniform], dtype=dtype, **params) == [expected]
    assert reference_next_token(TIED, uniform=uniform, **{
        "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, **params}) == expected


def test_sampling_uses_last_position_per_row():
    logits = np.full((2, 3, 6), -30.0, np.float32)
    logits[:, 0, 4] = 10.0  # earlier positions would pick token 4
    logits[0, 2] = THREE
    logits[1, 2] = [0.0, 0.0, 0.0, 0.0, 0.0, 3.0]
    assert sample(logits, [0.6, 0.5]) == [0, 5]
    assert sample(logits, [0.6, 0.99], top_k=1) == [3, 5]
    assert sample(logits[:, 2], [0.9, 0.5]) == [5, 5]


def test_sampling_with_repetition_penalty():
    row = [1.0, 3.0, 1.4, -1.0]  # with prev [1, 1, 3] and penalty 2: [1.0, 1.5, 1.4, -2.0]
    kw = {"penalty": 2.0, "prev_tokens": [[1, 1, 3]], "top_k": 0, "top_p": 1.0, "min_p": 0.0}
    assert sample([row], [0.2], temperature=1.0, **kw) == [1]
    assert sample([row], [0.5], temperature=1.0, **kw) == [2]  # c = .359 .684 .977 1.0
    assert sample([row], [0.9], temperature=1.0, **kw) == [0]
    assert sample([row], [0.99], temperature=1.0, **kw) == [3]
    assert sample([[row]], [0.99], temperature=0.1, **kw) == [2]  # c = .731 .999 ...
    for u in (0.2, 0.5, 0.9, 0.99):
        ref = reference_next_token(row, temperature=1.0, uniform=u, penalty=2.0,
                                   prev_tokens=[1, 1, 3], top_k=0, top_p=1.0, min_p=0.0)
        assert sample([row], [u], dtype="float16", temperature=1.0, **kw) == [ref]


def test_uniform_at_the_top_never_picks_a_dropped_token():
    for u in (F32_BELOW_ONE, 1.0):  # 1.0 may come from rounding a float64 draw to float32
        assert sample([THREE], [u], top_k=2) == [0]
        assert sample([THREE], [u], top_p=0.6) == [0]
        assert sample([THREE], [u], min_p=0.5) == [0]
        assert reference_next_token(THREE, temperature=1.0, top_k=2, top_p=1.0, min_p=0.0,
                                    uniform=u) == 0


# Ten tokens at logit 5 among 990 at logit 0: p(big) = e^5 / (10 e^5 + 990) = 0.0600 for
# top_k = V, so top_p 0.5 keeps 9 of them; with top_k = 500 the normalizer is 10 e^5 + 490,
# p(big) = 0.0752 and 7 are kept. A normalizer over the first 257 candidates only would keep 6.
BIG = [3, 17, 101, 250, 311, 502, 640, 777, 901, 998]


def _big_row():
    row = np.zeros(1000, np.float32)
    row[BIG] = 5.0
    return row


def test_large_k_uses_the_normalizer_of_the_whole_top_k():
    row = _big_row()
    assert sample([row], [0.95], top_k=0, top_p=0.5) == [BIG[8]]
    assert sample([row], [0.95], top_k=1000, top_p=0.5) == [BIG[8]]
    assert sample([row], [0.95], top_k=500, top_p=0.5) == [BIG[6]]
    assert sample([row], [0.95], top_k=100, top_p=0.5) == [BIG[5]]  # p = .0943: 6 kept
    for k in (0, 500, 100):
        ref = reference_next_token(row, temperature=1.0, top_k=k, top_p=0.5, min_p=0.0, uniform=0.95)
        assert sample([row], [0.95], top_k=k, top_p=0.5) == [ref]


def test_large_k_falls_back_to_a_full_sort_for_flat_distributions():
    row = _big_row()
    # all 1000 kept: 0.95 lands past the big tokens' 0.5997, on small token 866 (in index order)
    small = [i for i in range(1000) if i not in BIG]
    assert sample([row], [0.95], top_k=0) == [small[866]]
    assert reference_next_token(row, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                                uniform=0.95) == small[866]
    # with top_k = 500: big 0.7518, then the first 490 small ones at 0.000506 -> small 391.3
    assert sample([row], [0.95], top_k=500) == [small[391]]
    # batched: one row decided among the candidates, one needing the full sort
    assert sample([row, row], [0.95, 0.95], top_k=0) == [small[866]] * 2
    two = np.stack([row, row])
    two[1, BIG] = 20.0
    assert sample(two, [0.95, 0.95], top_k=0) == [small[866], BIG[9]]


def test_large_k_without_top_p_counts_the_mass_min_p_keeps():
    # 10 tokens at logit 5 (p .0469), 400 at 1 (p .00086), 590 at 0 (p .00032): min_p 0.01
    # keeps 410 tokens, past the 257 candidates, with mass .8133 (.6818 among the candidates)
    row = np.zeros(1000, np.float32)
    big = list(range(5, 1000, 100))
    mid = [i for i in range(1, 1000, 2) if i not in big][:400]
    row[big], row[mid] = 5.0, 1.0
    kw = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
    assert sample([row], [0.7], min_p=0.01, **kw) == [mid[116]]  # decided among the candidates
    assert sample([row], [0.9], min_p=0.01, **kw) == [mid[305]]  # needs the full sort
    assert sample([row], [0.7], min_p=0.0, **kw) == [mid[268]]  # needs the full sort
    assert sample([row, row], [0.7, 0.3], min_p=0.01, **kw) == [mid[116], big[5]]
    for u, min_p in ((0.7, 0.01), (0.9, 0.01), (0.7, 0.0), (0.55, 0.0)):
        ref = reference_next_token(row, uniform=u, min_p=min_p, **kw)
        assert sample([row], [u], min_p=min_p, **kw) == [ref]
        assert sample([row], [u], min_p=min_p, top_p=1.5, temperature=1.0, top_k=0) == [ref]


def _stable_reference(row, **kw):
    """The reference's token, or None when a nudge of uniform / top_p / min_p (well above
    float32 rounding of the graph's sums) changes it."""
    token = reference_next_token(row, **kw)
    for name in ("uniform", "top_p", "min_p"):
        for eps in (-2e-5, 2e-5):
            if reference_next_token(row, **dict(kw, **{name: kw[name] + eps})) != token:
                return None
    return token


@pytest.mark.parametrize("vocab,scale", [(40, 1.0), (40, 4.0), (1000, 1.0), (1000, 3.0), (1000, 0.2)])
def test_random_logits_match_the_reference(vocab, scale):
    rng = np.random.default_rng(vocab + int(scale * 10))
    checked = total = 0
    for _ in range(4):
        logits = (rng.standard_normal((2, vocab)) * scale).astype(np.float32)
        prev = rng.integers(0, vocab, (2, 5))
        for kw in (
            {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
            {"temperature": 0.7, "top_k": 50, "top_p": 0.9, "min_p": 0.0},
            {"temperature": 1.3, "top_k": 0, "top_p": 0.95, "min_p": 0.05},
            {"temperature": 0.8, "top_k": 300, "top_p": 0.8, "min_p": 0.0},
            {"temperature": 1.0, "top_k": 7, "top_p": 1.0, "min_p": 0.2},
        ):
            uniform = rng.random(2).astype(np.float32).tolist()
            for penalty in (None, 1.3):
                pkw = {} if penalty is None else {"penalty": penalty, "prev_tokens": prev.tolist()}
                got = sample(logits, uniform, **kw, **pkw)
                got16 = sample(logits.astype(np.float16), uniform, dtype="float16", **kw, **pkw)
                for b in range(2):
                    extra = {} if penalty is None else {"penalty": penalty, "prev_tokens": prev[b].tolist()}
                    total += 2
                    want = _stable_reference(logits[b].tolist(), uniform=uniform[b], **kw, **extra)
                    row16 = logits[b].astype(np.float16).astype(np.float32).tolist()
                    want16 = _stable_reference(row16, uniform=uniform[b], **kw, **extra)
                    if want is not None:
                        checked += 1
                        assert got[b] == want, (kw, penalty, b)
                    if want16 is not None:
                        checked += 1
                        assert got16[b] == want16, (kw, penalty, b, "float16")
    assert checked >= 0.9 * total


def test_same_seed_same_tokens():
    logits = (np.random.default_rng(7).standard_normal((20, 1, 300)) * 2).astype(np.float32)

    def run(seed):
        rng = random.Random(seed)
        return [sample(step, [rng.random()], temperature=0.9, top_k=40, top_p=0.95)[0] for step in logits]

    first = run(1234)
    _SESSIONS.clear()  # a fresh session gives the same tokens too
    assert run(1234) == first
    assert run(4321) != first
    rng = random.Random(1234)
    expected = [reference_next_token(step[0].tolist(), temperature=0.9, top_k=40, top_p=0.95, min_p=0.0,
                                     uniform=rng.random()) for step in logits]
    assert first == expected


# --- float16 logits (fp16 models): the graphs widen them to float32 first, exactly -----------

def _fp16_rows(rng, rows, vocab, scale):
    """float16 logits whose rounding makes ties among the top values (a float16 model's own)."""
    logits = (rng.standard_normal((rows, vocab)) * scale).astype(np.float16)
    logits[:, 3] = logits.max(axis=1)  # a tie with the maximum: the lower index must win
    return logits


@pytest.mark.parametrize("vocab,scale", [(50, 1.0), (1000, 4.0), (5000, 12.0)])
def test_greedy_on_float16_equals_the_reference_on_the_widened_values(vocab, scale):
    rng = np.random.default_rng(vocab)
    logits = _fp16_rows(rng, 4, vocab, scale)
    prev = rng.integers(0, vocab, (4, 6))
    for penalty in (None, 1.3):
        got = greedy(logits, dtype="float16", penalty=penalty, prev_tokens=None if penalty is None else prev)
        for b in range(4):
            row = logits[b].astype(np.float32).tolist()  # exact: every float16 is a float32
            extra = {} if penalty is None else {"penalty": penalty, "prev_tokens": prev[b].tolist()}
            assert got[b] == reference_greedy_token(row, **extra), (penalty, b)


def test_sampler_runs_float16_logits_from_a_backend():
    """search.sampler.Sampler on a NativeBackend given float16 logits, as a fp16 model makes
    them: the same tokens as the reference on the widened values, seed for seed."""
    from onnxpipe.backends.base import TensorInfo
    from onnxpipe.backends.native import NativeBackend
    from onnxpipe.search.options import SearchOptions
    from onnxpipe.search.sampler import Sampler

    backend = NativeBackend()
    rng = np.random.default_rng(3)
    steps = [_fp16_rows(rng, 1, 300, 3.0)[:, None, :] for _ in range(12)]  # [1, 1, V] each
    info = TensorInfo("logits", "float16", ("batch", "seq", 300))
    for options in (SearchOptions(), SearchOptions(do_sample=True, temperature=0.9, top_k=40, top_p=0.95,
                                                   repetition_penalty=1.2, random_seed=9)):
        sampler = Sampler(backend, "cpu", options, info)
        draws = random.Random(9)
        history = [7, 8]
        for step in steps:
            token = sampler(backend.tensor(step.reshape(-1).tolist(), "float16", step.shape), history)
            row = step.reshape(-1).astype(np.float32).tolist()
            pen = {"penalty": options.repetition_penalty, "prev_tokens": history}
            if options.do_sample:
                want = reference_next_token(row, temperature=0.9, top_k=40, top_p=0.95, min_p=0.0,
                                            uniform=draws.random(), **pen)
            else:
                want = reference_greedy_token(row, **pen)
            assert token == want
            history = history + [token]


# ---- every position of [1, S, V] as its own row (speculative verification) ---------------------

def test_every_position_greedy_picks_per_row_with_each_rows_own_penalty():
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(1, 4, 50)).astype(np.float32)
    prev = [[3, 3, 3], [3, 9, 9], [3, 9, 11], [1, 2, 4]]     # padded rows repeat an id: counted once
    graph = greedy_graph("float32", True, 3, every_position=True)
    got = _session(graph).run(None, {"logits": logits, "penalty": np.array([1.7], np.float32),
                                     "prev_tokens": np.array(prev, np.int64)})[0].tolist()
    want = [reference_greedy_token(logits[0, i].tolist(), penalty=1.7, prev_tokens=prev[i]) for i in range(4)]
    assert got == want


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_position_sampling_equals_the_reference_row_by_row(dtype):
    rng = np.random.default_rng(11)
    logits = (rng.normal(size=(1, 5, 300)) * 3).astype(dtype)
    uniforms = [0.05, 0.37, 0.61, 0.88, 0.999]
    graph = sampling_graph(dtype, False, 3, every_position=True)
    feeds = {"logits": logits, "temperature": np.array([0.8], np.float32), "top_k": np.array([40], np.int64),
             "top_p": np.array([0.9], np.float32), "min_p": np.array([0.01], np.float32),
             "uniform": np.array(uniforms, np.float32)}
    got = _session(graph).run(None, feeds)[0].tolist()
    want = [reference_next_token(logits[0, i].astype(np.float32).tolist(), temperature=0.8, top_k=40, top_p=0.9,
                                 min_p=0.01, uniform=u) for i, u in enumerate(uniforms)]
    assert got == want


def test_every_position_needs_rank_3_logits():
    with pytest.raises(ValueError, match="every_position"):
        greedy_graph("float32", False, 2, every_position=True)
