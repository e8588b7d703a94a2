"""The allowed-token bitmask input of the sampler graphs (``with_allowed``: uint32[B, ceil(V/32)],
XGrammar's layout) against the pure-Python reference: greedy, sampling and every_position,
random logits and bitmasks over several seeds, bits past V ignored, float16 logits, and its
composition with the repetition penalty and suppressed ids (a row the suppression empties keeps
the bitmask alone)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from onnxpipe.ops import greedy_graph, sampling_graph
from tests.py.ops.reference_sampler import allowed_ids, reference_greedy_token, reference_next_token


def _words(flags: np.ndarray, junk_past_vocab: bool = True, rng=None) -> np.ndarray:
    """uint32[B, ceil(V/32)] from bool[B, V]; the bits past V set at random (they must not count)."""
    rows, vocab = flags.shape
    width = -(-vocab // 32)
    padded = np.zeros((rows, width * 32), bool)
    padded[:, :vocab] = flags
    if junk_past_vocab and width * 32 > vocab:
        padded[:, vocab:] = rng.random((rows, width * 32 - vocab)) < 0.5 if rng is not None else True
    shifts = np.arange(32, dtype=np.uint64)
    return (padded.reshape(rows, width, 32).astype(np.uint64) << shifts).sum(axis=2).astype(np.uint32)


def _flags(rng, rows: int, vocab: int, density: float) -> np.ndarray:
    flags = rng.random((rows, vocab)) < density
    flags[np.arange(rows), rng.integers(vocab, size=rows)] = True   # never an empty row
    return flags


def test_words_round_trip_through_the_reference_reader():
    rng = np.random.default_rng(0)
    flags = _flags(rng, 3, 333, 0.3)
    words = _words(flags, rng=rng)
    assert words.shape == (3, 11) and words.dtype == np.uint32
    for row in range(3):
        assert allowed_ids(words[row].tolist(), 333) == flags[row].tolist()


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("with_penalty", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_follows_the_bitmask(dtype, with_penalty, seed):
    rng = np.random.default_rng(seed)
    vocab = 333   # not a multiple of 32: the last word has bits past V
    sess = ort.InferenceSession(greedy_graph(dtype, with_penalty, 3, with_allowed=True))
    for density in (0.02, 0.3, 0.9):
        logits = (2 * rng.standard_normal((2, 3, vocab))).astype(dtype)
        flags = _flags(rng, 2, vocab, density)
        feeds = {"logits": logits, "allowed": _words(flags, rng=rng)}
        prev = rng.integers(vocab, size=(2, 4))
        if with_penalty:
            feeds.update(penalty=np.array([1.7], np.float32), prev_tokens=prev.astype(np.int64))
        got = sess.run(None, feeds)[0].tolist()
        for row in range(2):
            want = reference_greedy_token(logits[row, -1].astype(np.float32).tolist(),
                                          penalty=1.7 if with_penalty else 1.0,
                                          prev_tokens=prev[row].tolist() if with_penalty else (),
                                          allowed=feeds["allowed"][row].tolist())
            assert got[row] == want and flags[row, want]


def test_greedy_with_one_allowed_token_picks_it_whatever_the_logits():
    sess = ort.InferenceSession(greedy_graph("float32", False, 2, with_allowed=True))
    logits = np.linspace(10, -10, 100, dtype=np.float32)[None]
    flags = np.zeros((1, 100), bool)
    flags[0, 97] = True
    assert sess.run(None, {"logits": logits, "allowed": _words(flags)})[0].tolist() == [97]


def test_bits_past_the_vocabulary_are_ignored():
    sess = ort.InferenceSession(greedy_graph("float32", False, 2, with_allowed=True))
    logits = np.zeros((1, 40), np.float32)
    logits[0, 39] = -5.0
    flags = np.zeros((1, 40), bool)
    flags[0, 39] = True
    words = _words(flags, junk_past_vocab=True)   # bits 40..63 all set: tokens that do not exist
    assert words[0, 1] == 0xFFFFFF80
    assert sess.run(None, {"logits": logits, "allowed": words})[0].tolist() == [39]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_sampling_follows_the_bitmask(dtype, seed):
    rng = np.random.default_rng(10 + seed)
    vocab = 500
    sess = ort.InferenceSession(sampling_graph(dtype, True, 2, with_suppress=True, with_allowed=True))
    for top_k, top_p, min_p in ((0, 1.0, 0.0), (5, 0.9, 0.0), (400, 0.8, 0.05), (0, 1.0, 0.1)):
        for density in (0.01, 0.2, 0.7):
            logits = (3 * rng.standard_normal((1, vocab))).astype(dtype)
            flags = _flags(rng, 1, vocab, density)
            allowed = _words(flags, rng=rng)
            suppress = [int(i) for i in rng.integers(vocab, size=3)]
            prev = [int(i) for i in rng.integers(vocab, size=5)]
            uniform = rng.random(1).astype(np.float32)
            feeds = {"logits": logits, "temperature": np.array([0.7], np.float32),
                     "top_k": np.array([top_k], np.int64), "top_p": np.array([top_p], np.float32),
                     "min_p": np.array([min_p], np.float32), "uniform": uniform,
                     "penalty": np.array([1.3], np.float32), "prev_tokens": np.array([prev], np.int64),
                     "suppress_ids": np.array(suppress, np.int64), "allowed": allowed}
            got = sess.run(None, feeds)[0].tolist()
            want = reference_next_token(logits[0].astype(np.float32).tolist(), temperature=0.7, top_k=top_k,
                                        top_p=top_p, min_p=min_p, uniform=float(uniform[0]), penalty=1.3,
                                        prev_tokens=prev, suppress=suppress, allowed=allowed[0].tolist())
            assert got == [want] and flags[0, want]
            if flags[0].sum() > len(set(suppress)):
                assert want not in suppress


@pytest.mark.parametrize("do_sample", [False, True])
def test_suppression_that_empties_the_row_keeps_the_bitmask_alone(do_sample):
    """A grammar that can only end, with its end ids suppressed (min_length): the pick stays in
    the grammar rather than leaving it."""
    build = sampling_graph if do_sample else greedy_graph
    sess = ort.InferenceSession(build("float32", False, 2, with_suppress=True, with_allowed=True))
    logits = np.array([[5.0, 1.0, 4.0, 0.5, 9.0, 2.0]], np.float32)
    flags = np.array([[False, True, False, True, False, False]])
    feeds = {"logits": logits, "allowed": _words(flags), "suppress_ids": np.array([1, 3], np.int64)}
    if do_sample:
        feeds.update(temperature=np.array([1.0], np.float32), top_k=np.array([0], np.int64),
                     top_p=np.array([1.0], np.float32), min_p=np.array([0.0], np.float32),
                     uniform=np.array([0.2], np.float32))
    got = sess.run(None, feeds)[0].tolist()
    ref = reference_next_token if do_sample else reference_greedy_token
    extra = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, uniform=0.2) if do_sample else {}
    want = ref(logits[0].tolist(), suppress=[1, 3], allowed=feeds["allowed"][0].tolist(), **extra)
    assert got == [want] and want in (1, 3)
    if not do_sample:
        assert want == 1
    # one allowed id left after suppression: suppression applies as usual
    feeds["suppress_ids"] = np.array([1], np.int64)
    assert sess.run(None, feeds)[0].tolist() == [3]


@pytest.mark.parametrize("do_sample", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_position_reads_one_bitmask_row_per_position(do_sample, seed):
    rng = np.random.default_rng(20 + seed)
    vocab, positions = 300, 4
    build = sampling_graph if do_sample else greedy_graph
    sess = ort.InferenceSession(build("float32", True, 3, with_suppress=True, every_position=True,
                                      with_allowed=True))
    logits = (2 * rng.standard_normal((1, positions, vocab))).astype(np.float32)
    flags = _flags(rng, positions, vocab, 0.1)
    allowed = _words(flags, rng=rng)
    prev = rng.integers(vocab, size=(positions, 3))
    uniform = rng.random(positions).astype(np.float32)
    feeds = {"logits": logits, "allowed": allowed, "suppress_ids": np.array([7], np.int64),
             "penalty": np.array([1.2], np.float32), "prev_tokens": prev.astype(np.int64)}
    if do_sample:
        feeds.update(temperature=np.array([0.9], np.float32), top_k=np.array([50], np.int64),
                     top_p=np.array([0.95], np.float32), min_p=np.array([0.0], np.float32), uniform=uniform)
    got = sess.run(None, feeds)[0].tolist()
    assert len(got) == positions
    for row in range(positions):
        common = dict(penalty=1.2, prev_tokens=prev[row].tolist(), suppress=[7], allowed=allowed[row].tolist())
        if do_sample:
            want = reference_next_token(logits[0, row].tolist(), temperature=0.9, top_k=50, top_p=0.95,
                                        min_p=0.0, uniform=float(uniform[row]), **common)
        else:
            want = reference_greedy_token(logits[0, row].tolist(), **common)
        assert got[row] == want and flags[row, want]


def test_a_full_bitmask_changes_nothing():
    rng = np.random.default_rng(5)
    plain = ort.InferenceSession(greedy_graph("float32", True, 3, with_suppress=True))
    masked = ort.InferenceSession(greedy_graph("float32", True, 3, with_suppress=True, with_allowed=True))
    for _ in range(10):
        logits = rng.standard_normal((1, 2, 100)).astype(np.float32)
        feeds = {"logits": logits, "penalty": np.array([1.5], np.float32),
                 "prev_tokens": rng.integers(100, size=(1, 3)).astype(np.int64),
                 "suppress_ids": np.array([int(np.argmax(logits[0, -1]))], np.int64)}
        full = _words(np.ones((1, 100), bool))
        assert masked.run(None, {**feeds, "allowed": full})[0].tolist() == plain.run(None, feeds)[0].tolist()
