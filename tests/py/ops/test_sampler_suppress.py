"""Suppressed ids in the sampler graphs (``with_suppress``) against the pure-Python reference
on random logits, greedy and sampling, float32 and float16, and the search Sampler's choice
of list (first new token: always + at_start; later: always)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from onnxpipe.backends.base import TensorInfo
from onnxpipe.backends.native import NativeBackend
from onnxpipe.ops import greedy_graph, sampling_graph
from tests.py.ops.reference_sampler import reference_greedy_token, reference_next_token
from onnxpipe.search.options import SearchOptions
from onnxpipe.search.sampler import Sampler


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_greedy_never_picks_a_suppressed_id(dtype):
    rng = np.random.default_rng(0)
    sess = ort.InferenceSession(greedy_graph(dtype, False, 3, with_suppress=True))
    for _ in range(20):
        logits = rng.standard_normal((1, 3, 300)).astype(dtype)
        best = int(np.argmax(logits[0, -1]))
        suppress = [best, int(rng.integers(300)), best]   # duplicates are harmless
        got = sess.run(None, {"logits": logits, "suppress_ids": np.array(suppress, np.int64)})[0]
        want = reference_greedy_token(logits[0, -1].astype(np.float32).tolist(), suppress=suppress)
        assert got.tolist() == [want] and want not in suppress


def test_sampling_with_suppression_matches_the_reference():
    rng = np.random.default_rng(1)
    sess = ort.InferenceSession(sampling_graph("float32", True, 2, with_suppress=True))
    for top_k in (0, 5, 400):
        for _ in range(15):
            logits = (3 * rng.standard_normal((1, 500))).astype(np.float32)
            order = np.argsort(-logits[0])
            suppress = [int(i) for i in order[:3]]
            feeds = {"logits": logits, "temperature": np.array([0.8], np.float32),
                     "top_k": np.array([top_k], np.int64), "top_p": np.array([0.9], np.float32),
                     "min_p": np.array([0.0], np.float32), "uniform": rng.random(1).astype(np.float32),
                     "penalty": np.array([1.3], np.float32), "prev_tokens": np.array([[int(order[3])]], np.int64),
                     "suppress_ids": np.array(suppress, np.int64)}
            got = sess.run(None, feeds)[0].tolist()
            want = reference_next_token(logits[0].tolist(), temperature=0.8, top_k=top_k, top_p=0.9, min_p=0.0,
                                        uniform=float(feeds["uniform"][0]), penalty=1.3,
                                        prev_tokens=[int(order[3])], suppress=suppress)
            assert got == [want] and want not in suppress


def test_sampler_uses_the_start_list_only_for_the_first_token():
    backend = NativeBackend()
    opts = SearchOptions(suppress_tokens=(2,), suppress_tokens_at_start=(1,))
    sampler = Sampler(backend, "cpu", opts, TensorInfo("logits", "float32", (1, "s", 4)))
    logits = backend.tensor([0.0, 3.0, 5.0, 1.0], "float32", (1, 1, 4))
    assert sampler(logits, [0], start=True) == 3    # 2 and 1 are out
    assert sampler(logits, [0], start=False) == 1   # only 2 is out
    plain = Sampler(backend, "cpu", SearchOptions(), TensorInfo("logits", "float32", (1, "s", 4)))
    assert plain.suppress_graph is None and plain(logits, [0], start=True) == 2
    # an id past the vocabulary can't be picked anyway: left out (transformers ignores it too)
    past = Sampler(backend, "cpu", SearchOptions(suppress_tokens=(4, 2), suppress_tokens_at_start=(9,)),
                   TensorInfo("logits", "float32", (1, "s", 4)))
    assert past.suppress == {True: (2,), False: (2,)} and past(logits, [0], start=True) == 1
    # a symbolic logits width: the one the graph gives (LoadedPipeline.vocab_size) decides
    symbolic = Sampler(backend, "cpu", SearchOptions(suppress_tokens=(4, 2)), TensorInfo("logits", "float32", (1, "s", "v")), 4)
    assert symbolic.vocab == 4 and symbolic.suppress[False] == (2,)


def test_suppress_options_are_checked():
    from onnxpipe.errors import InputError
    from onnxpipe.search.options import resolve

    assert resolve(SearchOptions(), {"suppress_tokens": 7}).suppress_tokens == (7,)
    for bad in (["a"], [-1], [True]):
        with pytest.raises(InputError, match="suppress_tokens_at_start"):
            resolve(SearchOptions(), {"suppress_tokens_at_start": bad})
