"""The repetition penalty's history rows (search/sampler.py penalty_rows): placeholder ids < 0
(image rows in a phi3v prompt) are left out, short rows padded with a repeat."""

from __future__ import annotations

import numpy as np

from onnxpipe.backends.base import TensorInfo
from onnxpipe.backends.native import NativeBackend
from onnxpipe.search.options import SearchOptions
from onnxpipe.search.sampler import Sampler, penalty_rows


def test_rows_leave_out_placeholders_and_pad_with_a_repeat():
    assert penalty_rows([[5, -1, -1, 7], [3]]) == ([5, 7, 3, 3], (2, 2))
    assert penalty_rows([[-1, -2]]) == ([0], (1, 1))


def test_a_placeholder_does_not_penalize_the_last_vocabulary_id():
    backend = NativeBackend()
    sampler = Sampler(backend, "cpu", SearchOptions(repetition_penalty=4.0), TensorInfo("logits", "float32", (1, "s", 6)))
    logits = np.array([[[0.0, 1.0, 0.5, 0.2, 0.1, 1.5]]], np.float32)
    # the last id (5) leads; a -1 in the history must not reach it through a from-the-end gather
    assert sampler(backend.tensor(logits.ravel().tolist(), "float32", (1, 1, 6)), [1, -1]) == 5
    assert sampler(backend.tensor(logits.ravel().tolist(), "float32", (1, 1, 6)), [1, 5]) == 2   # a real 5 is penalized: 1.5 / 4 < 0.5
