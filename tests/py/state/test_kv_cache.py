"""One KV cache class per layout, chosen by make_kv_cache from the session's inputs and the
kv_cache declaration; each class's bind / update / rewind / reorder run for real on onnxruntime
(the engine-side graphs of ops/kv.py) over a session described by hand."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort
import pytest

from onnxpipe.backends.base import TensorInfo
from onnxpipe.backends.native import NativeBackend
from onnxpipe.config.schema import KVCacheSpec, SlidingWindow
from onnxpipe.errors import ConfigError
from onnxpipe.state import kv_cache
from onnxpipe.state.base import StepContext
from onnxpipe.state.kv_cache import (CombinedKVCache, KVCache, SeparateKVCache, SharedBufferKVCache,
                                     SlidingSeparateKVCache, SlidingSharedBufferKVCache, make_kv_cache)

HEADS, HEAD = 2, 4


@dataclass
class Described:
    """A session known only by its I/O (no model file: nothing is read from a graph)."""

    name: str
    inputs: dict
    outputs: dict


def separate(layers: int = 2) -> Described:
    past = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    inputs = {n: TensorInfo(n, "float32", ("batch", HEADS, "past", HEAD)) for n in ["input_ids"] + past}
    outputs = {n.replace("past_key_values", "present"): None for n in past}
    return Described("decoder", inputs, {"logits": None, **outputs})


def combined() -> Described:
    inputs = {"past_0": TensorInfo("past_0", "float32", (2, "batch", HEADS, "past", HEAD))}
    return Described("decoder", {"input_ids": None, **inputs}, {"logits": None, "present_0": None})


class Growing(NativeBackend):
    """A backend that can't bind outputs (the browser's): shared buffers fall back to separate."""

    supports_bound_outputs = False


def make(session, backend=None, **spec) -> KVCache | None:
    return make_kv_cache(backend or NativeBackend(), session, KVCacheSpec(**spec), 64, "pipeline.json")


WINDOW = SlidingWindow(window_size=4, layers=(0,), cache_slack=2)


@pytest.mark.parametrize("session, spec, backend, expected", [
    (separate, {}, NativeBackend, SeparateKVCache),
    (separate, {"format": "separate"}, NativeBackend, SeparateKVCache),
    (combined, {}, NativeBackend, CombinedKVCache),
    (separate, {"format": "shared_buffer"}, NativeBackend, SharedBufferKVCache),
    (separate, {"format": "shared_buffer"}, Growing, SeparateKVCache),
    (separate, {"sliding_window": WINDOW}, NativeBackend, SlidingSeparateKVCache),
    (separate, {"format": "shared_buffer", "sliding_window": WINDOW}, NativeBackend, SlidingSharedBufferKVCache),
    (separate, {"format": "shared_buffer", "sliding_window": WINDOW}, Growing, SlidingSeparateKVCache),
], ids=["auto", "separate", "combined", "shared_buffer", "shared_buffer-unbound", "sliding-separate",
        "sliding-shared_buffer", "sliding-shared_buffer-unbound"])
def test_the_factory_picks_the_class_of_the_declared_layout(session, spec, backend, expected):
    kv = make(session(), backend(), **spec)
    assert type(kv) is expected
    assert kv.format == ("combined" if expected is CombinedKVCache else
                         "shared_buffer" if issubclass(expected, SharedBufferKVCache) else "separate")


def test_the_factory_finds_no_cache_and_refuses_a_windowed_combined_one():
    plain = Described("decoder", {"input_ids": None}, {"logits": None})
    assert make(plain) is None
    with pytest.raises(ConfigError) as info:
        make(combined(), sliding_window=WINDOW)
    assert info.value.path == "$.pipeline.state.kv_cache.sliding_window"
    assert "combined" in info.value.detail


def run_step(kv, session, past: int, new: int, batch: int = 1):
    """bind, then outputs as the model would give them (past + new rows, a windowed layer's
    buffer at its size; filled with the step's end position), then update; returns the feeds."""
    ctx = StepContext(past, new, batch)
    feeds, bound = {}, {}
    kv.bind(session.name, feeds, bound, ctx)
    outputs = {}
    for slot in kv.slots:
        shape = list(feeds[slot.past.name].shape())
        if slot.past.name not in kv.bounded:
            shape[kv.seq_axis[slot.past.name]] += new
        values = np.full(shape, past + new, np.float32)
        values[1:] += 100   # batch rows told apart
        outputs[slot.present] = ort.OrtValue.ortvalue_from_numpy(values)
    kv.update(session.name, outputs, ctx)
    return feeds, bound


def test_separate_grows_cuts_back_and_reorders_in_the_engine():
    session = separate()
    kv = make(session)
    feeds, bound = run_step(kv, session, 0, 3, batch=2)
    assert bound == {} and feeds["past_key_values.0.key"].shape() == [2, HEADS, 0, HEAD]
    run_step(kv, session, 3, 1, batch=2)
    assert all(s.value.shape() == [2, HEADS, 4, HEAD] for s in kv.slots)
    assert kv.cannot_rewind() is None and kv.rewind(2)
    assert all(s.value.shape() == [2, HEADS, 2, HEAD] for s in kv.slots)
    assert kv.cannot_reorder() is None
    kv.reorder([1, 1, 0])
    rows = kv.slots[0].value.numpy()
    assert rows.shape == (3, HEADS, 2, HEAD) and (rows[:, 0, 0, 0] == [104, 104, 4]).all()
    kv.reset()
    assert all(s.value is None for s in kv.slots)


def test_combined_is_fed_back_but_never_cut_back_or_reordered():
    session = combined()
    kv = make(session)
    feeds, _ = run_step(kv, session, 0, 3)
    assert feeds["past_0"].shape() == [2, 1, HEADS, 0, HEAD]
    assert kv.slots[0].value.shape() == [2, 1, HEADS, 3, HEAD]
    assert not kv.rewind(2)
    assert kv.cannot_rewind() == 'the KV cache format "combined" can\'t be cut back'
    assert kv.cannot_reorder() == 'the KV cache format "combined" has no leading batch axis to reorder'
    with pytest.raises(NotImplementedError, match="no leading batch axis"):
        kv.reorder([0, 0])


def test_shared_buffer_binds_one_buffer_as_past_and_present_and_grows_in_chunks():
    session = separate()
    kv = make(session, format="shared_buffer")
    ctx = StepContext(0, 3)
    feeds, bound = {}, {}
    kv.bind(session.name, feeds, bound, ctx)
    for slot in kv.slots:
        assert feeds[slot.past.name] is bound[slot.present] is slot.value
        assert slot.value.shape() == [1, HEADS, 64, HEAD]   # the chunk, clamped to max_length 64
    kv.update(session.name, {}, ctx)
    assert kv.capacity == 64 and kv.slots[0].value is feeds["past_key_values.0.key"]
    assert kv.rewind(1) and kv.cannot_rewind() is None and kv.cannot_reorder() is None
    kv.bind(session.name, {}, {}, StepContext(64, 10))   # beyond max_length: grown to what is needed
    assert kv.capacity == 74 and kv.slots[0].value.shape() == [1, HEADS, 74, HEAD]
    kv.reset()
    assert kv.capacity == 0 and all(s.value is None for s in kv.slots)


def test_sliding_separate_keeps_windowed_layers_at_capacity_and_rewinds_only_what_is_resident():
    session = separate()
    kv = make(session, sliding_window=WINDOW)
    assert kv.bounded == {"past_key_values.0.key", "past_key_values.0.value"}
    assert [s.past.name for s in kv.growing] == ["past_key_values.1.key", "past_key_values.1.value"]
    feeds, _ = run_step(kv, session, 0, 3)
    assert feeds["past_key_values.0.key"].shape() == [1, HEADS, 6, HEAD]   # window 4 + slack 2
    assert feeds["past_key_values.1.key"].shape() == [1, HEADS, 0, HEAD]
    assert kv.window.total == 3
    assert kv.cannot_rewind() == "the KV cache's sliding-window layers drop rows that going back would need"
    assert kv.rewind(2) and kv.window.total == 2
    assert kv.slots[0].value.shape()[2] == 6 and kv.slots[1].value.shape()[2] == 2   # only growing ones cut
    for past in range(2, 8):
        run_step(kv, session, past, 1)
    assert not kv.rewind(4)   # rows evicted at 8 tokens are needed at 4
    kv.reset()
    assert kv.window.total == 0


def test_sliding_shared_buffer_allocates_windowed_layers_once_and_grows_the_others():
    session = separate()
    kv = make(session, format="shared_buffer", sliding_window=WINDOW)
    kv.bind(session.name, {}, {}, StepContext(0, 3))
    windowed = kv.slots[0].value
    assert windowed.shape() == [1, HEADS, 6, HEAD] and kv.slots[1].value.shape() == [1, HEADS, 64, HEAD]
    kv.update(session.name, {}, StepContext(0, 3))
    assert kv.window.total == 3 and kv.rewind(3)
    kv.bind(session.name, {}, {}, StepContext(64, 10))
    assert kv.slots[0].value is windowed and kv.slots[1].value.shape() == [1, HEADS, 74, HEAD]


def test_no_method_switches_on_the_layout():
    """The layout is the class: no method compares ``self.format`` or asks isinstance."""
    tree = ast.parse(inspect.getsource(kv_cache))
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, ast.Compare):
                names = {ast.unparse(x) for x in [node.left, *node.comparators]}
                assert "self.format" not in names, f"{cls.name}: {ast.unparse(node)}"
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "isinstance":
                raise AssertionError(f"{cls.name}: {ast.unparse(node)}")
