"""Beam search's parts: the step graph and the KV reorder graph against numpy, the masks
against transformers' definitions, and the option checks. (Whole searches against
transformers: tests/py/loops/test_beam_search.py.)"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxpipe.ops import beam_graph, gather_batch_many_graph
from onnxpipe.search import masks
from onnxpipe.search.options import SearchOptions, problems


def _run(model_bytes, names, **feeds):
    onnx.checker.check_model(onnx.load_from_string(model_bytes), full_check=True)
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return sess.run(names, feeds)


def _log_softmax(x):
    x = x.astype(np.float64)
    return x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("rank", [2, 3])
def test_beam_step_is_log_softmax_masked_penalised_plus_scores_top_k(dtype, rank):
    rng = np.random.default_rng(0)
    beams, vocab, k = 3, 50, 7
    logits = (rng.standard_normal((beams, 2, vocab)) * 3).astype(dtype)
    scores = np.array([-1.5, -2.0, -2.25], np.float32)
    prev = np.array([[4, 9, 4], [1, 2, 3], [7, 7, 7]], np.int64)
    ban_ids = np.array([[5, 0], [8, 8], [0, 0]], np.int64)
    ban_add = np.array([[-np.inf, 0], [-np.inf, -np.inf], [0, 0]], np.float32)
    feeds = dict(logits=logits if rank == 3 else logits[:, -1], scores=scores, k=np.array([k], np.int64),
                 penalty=np.array([1.4], np.float32), prev_tokens=prev, ban_ids=ban_ids, ban_add=ban_add)
    top, index = _run(beam_graph(dtype, with_penalty=True, logits_rank=rank, with_bans=True),
                      ["top_scores", "top_index"], **feeds)
    lp = _log_softmax(logits[:, -1].astype(np.float32))
    for row in range(beams):
        for t in set(prev[row]):
            lp[row, t] = lp[row, t] / 1.4 if lp[row, t] > 0 else lp[row, t] * 1.4
    lp[0, 5] = lp[1, 8] = -np.inf
    total = (lp + scores[:, None]).reshape(-1)
    want = np.argsort(-total, kind="stable")[:k]
    assert index.tolist() == want.tolist()
    np.testing.assert_allclose(top, total[want], rtol=1e-5)


def test_gather_batch_reorders_and_widens_caches_in_one_run():
    a = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    b = np.arange(2 * 1 * 4 * 5, dtype=np.float32).reshape(2, 1, 4, 5) * 2
    for index in ([1, 0], [0, 0, 0, 0], [1, 1, 0]):
        ya, yb = _run(gather_batch_many_graph("float32", 2), None, x0=a, x1=b, index=np.array(index, np.int64))
        np.testing.assert_array_equal(ya, a[index])
        np.testing.assert_array_equal(yb, b[index])


def _transformers_ngram_bans(ids, n):
    """transformers' NoRepeatNGramLogitsProcessor on one row, as its docs define it."""
    torch = pytest.importorskip("torch")
    from transformers.generation.logits_process import NoRepeatNGramLogitsProcessor

    scores = torch.zeros((1, 40))
    out = NoRepeatNGramLogitsProcessor(n)(torch.tensor([ids]), scores)
    return sorted(torch.nonzero(torch.isinf(out[0])).flatten().tolist())


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("ids", [[1, 2, 3, 1, 2], [5, 5, 5, 5], [1, 2, 1, 3, 1], [7], [3, 4, 3, 4, 3, 4, 3]])
def test_repeated_ngrams_are_transformers_bans(ids, n):
    assert masks.repeated_ngram_ids(ids, n) == _transformers_ngram_bans(ids, n)


def test_end_ids_masked_until_both_bounds_are_reached():
    o = SearchOptions(min_length=10, min_new_tokens=3)
    assert masks.ends_masked(o, 9, 5) and masks.ends_masked(o, 12, 2)
    assert not masks.ends_masked(o, 10, 3)
    assert not masks.ends_masked(SearchOptions(), 1, 0)


def test_problems_name_the_option():
    bad = SearchOptions(num_beams=2, do_sample=True, num_return_sequences=3, length_penalty=math.inf,
                        early_stopping="no", min_length=-1)
    assert {name for name, _ in problems(bad)} == {"do_sample", "num_return_sequences", "length_penalty",
                                                   "early_stopping", "min_length"}
    assert problems(SearchOptions(num_beams=4, num_return_sequences=4, early_stopping="never")) == []
