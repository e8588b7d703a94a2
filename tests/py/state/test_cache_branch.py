"""``use_cache_branch``: false on the first step (empty past), true on every later one, in
the shape the session declares."""

from __future__ import annotations

import pytest

from onnxpipe.backends.base import TensorInfo
from onnxpipe.backends.native import NativeBackend
from onnxpipe.state.base import StepContext
from onnxpipe.state.cache_branch import CacheBranch


@pytest.mark.parametrize("shape", [(1,), ()])
def test_false_while_the_past_is_empty(shape):
    backend = NativeBackend()
    comp = CacheBranch(backend, {"decoder": TensorInfo("use_cache_branch", "bool", shape)})
    assert comp.inputs == {"decoder": {"use_cache_branch"}} and comp.outputs == {}
    seen = []
    for ctx in (StepContext(0, 8), StepContext(8, 1), StepContext(9, 1)):
        feeds: dict = {}
        comp.bind("decoder", feeds, {}, ctx)
        value = feeds["use_cache_branch"].numpy()
        assert value.shape == shape and value.dtype == bool
        seen.append(bool(value.reshape(-1)[0]))
    assert seen == [False, True, True]
    assert comp.rewind(3)   # derived from lengths: nothing to cut back
