"""Sliding-window layers (Gemma-2 style genai bundle): bounded caches as onnxruntime-genai keeps them.

genai_gemma2 alternates local (window 16) and global layers; its GroupQueryAttention evicts
from window-sized buffers itself (sliding_window_cache=1). References: the fixture's greedy
tokens (transformers eager == onnxruntime-genai), onnxruntime-genai run at test time on other
prompts, and the graph itself run by onnxruntime with other buffer sizes.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import onnxpipe
from onnxpipe.config.schema import SlidingWindow
from onnxpipe.errors import ConfigError
from onnxpipe.state.kv_cache import KVCache
from onnxpipe.state.sliding_window import Windowing, capacity
from tests.agreement import FP32_KERNELS, assert_greedy_agrees, margins
from tests.fixtures import tiny_models

NAME = "genai_gemma2"


def _copy(tmp_path, edit_config=None, edit_graph=None):
    """The fixture bundle copied to tmp_path, its genai_config.json / graph edited."""
    src = tiny_models.ensure(NAME)
    dst = tmp_path / NAME
    shutil.copytree(src, dst)
    if edit_config:
        cfg = json.loads((dst / "genai_config.json").read_text())
        edit_config(cfg)
        (dst / "genai_config.json").write_text(json.dumps(cfg))
    if edit_graph:
        model = onnx.load(str(dst / "model.onnx"))
        edit_graph(model)
        onnx.save(model, str(dst / "model.onnx"))
    return dst


def _no_share(cfg):
    cfg["search"]["past_present_share_buffer"] = False


def _kv(pipe):
    return next(c for c in pipe.executor.components if isinstance(c, KVCache))


def _genai(bundle, ids, n):
    """onnxruntime-genai greedy: n tokens after ids, with each step's top-2 margin."""
    import onnxruntime_genai as og

    model = og.Model(str(bundle))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + n, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(np.array([ids], np.int32))
    tokens, logits = [], []
    while not gen.is_done():
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
        logits.append(np.array(gen.get_output("logits"))[0, -1])
    return tokens, margins(logits)


@pytest.mark.parametrize("share", [True, False], ids=["shared_buffer", "separate"])
def test_local_layers_keep_a_bounded_cache_and_the_tokens_of_genai(tmp_path, share):
    bundle = tiny_models.ensure(NAME) if share else _copy(tmp_path, _no_share)
    expected = tiny_models.load_expected(NAME)
    window = expected["sliding_window"]
    total = len(expected["input_ids"]) + expected["max_new_tokens"]
    assert window["window_size"] < total and window["layers"]   # the window matters in this run
    pipe = onnxpipe.load(bundle)
    result = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False, ignore_eos=True)
    assert result.tokens == expected["greedy_tokens"]
    kv = _kv(pipe)
    assert kv.format == ("shared_buffer" if share else "separate")
    # onnxruntime-genai on cpu: window + 16 positions (cache_slack 0 = the provider default)
    assert kv.window.capacity == window["window_size"] + 16 < total - 1
    local = {f"past_key_values.{i}.{kv_}" for i in window["layers"] for kv_ in ("key", "value")}
    assert kv.window.names == local
    for slot in kv.slots:
        length = pipe.backend.shape(slot.value)[2]
        if slot.past.name in local:
            assert length == kv.window.capacity
        else:   # global layers hold every position
            assert length >= total - 1


@pytest.mark.parametrize("slack", [1, 7, 1000])
def test_cache_size_changes_no_token(tmp_path, slack):
    """The window lives in the graph; the buffer size (W+1, W+7, clamped to max_length) doesn't."""
    def edit(cfg):
        cfg["model"]["decoder"]["sliding_window"]["cache_slack"] = slack
        _no_share(cfg)

    expected = tiny_models.load_expected(NAME)
    pipe = onnxpipe.load(_copy(tmp_path, edit))
    result = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False, ignore_eos=True)
    assert result.tokens == expected["greedy_tokens"]
    window = expected["sliding_window"]["window_size"]
    assert _kv(pipe).window.capacity == min(window + slack, pipe.spec.generation.max_length)


def test_the_window_matters(tmp_path):
    """The same weights without the window: equal while the prompt + tokens fit in it, then not."""
    def edit_config(cfg):
        del cfg["model"]["decoder"]["sliding_window"]

    def edit_graph(model):
        for node in model.graph.node:
            if node.op_type == "GroupQueryAttention":
                drop = ("local_window_size", "sliding_window_cache")
                keep = [a for a in node.attribute if a.name not in drop]
                del node.attribute[:]
                node.attribute.extend(keep)

    expected = tiny_models.load_expected(NAME)
    pipe = onnxpipe.load(_copy(tmp_path, edit_config, edit_graph))
    tokens = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False, ignore_eos=True).tokens
    fits = expected["sliding_window"]["window_size"] - len(expected["input_ids"]) + 1
    assert tokens[:fits] == expected["greedy_tokens"][:fits]
    assert tokens != expected["greedy_tokens"]


def test_resident_rows_follow_the_operator_contract():
    """Windowing.resident(T) is where GroupQueryAttention keeps positions: a small buffer's rows
    [0, L) equal the rows [T - L, T) of a buffer too large to evict (layer 0's keys)."""
    bundle = tiny_models.ensure(NAME)
    expected = tiny_models.load_expected(NAME)
    sess = ort.InferenceSession(str(bundle / "model.onnx"), providers=["CPUExecutionProvider"])
    window = SlidingWindow(window_size=16, layers=(0,), cache_slack=4)
    small = Windowing(window, {"past_key_values.0.key": 0}, "separate", "cpu", 256, "test")
    assert small.capacity == 20
    ids = expected["input_ids"] + expected["greedy_tokens"]
    names = [o.name for o in sess.get_outputs()]

    def run(cap):
        past = {i.name: np.zeros((1, 2, cap if ".0." in i.name or ".2." in i.name else 0, 16), np.float32)
                for i in sess.get_inputs() if i.name.startswith("past_")}
        rows, total, feed = [], 0, ids[:8]
        while feed:
            total += len(feed)
            out = dict(zip(names, sess.run(None, {"input_ids": np.array([feed], np.int64),
                                                  "attention_mask": np.ones((1, total), np.int64), **past})))
            past = {k.replace("present", "past_key_values"): v for k, v in out.items() if k != "logits"}
            rows.append((total, past["past_key_values.0.key"]))
            feed = ids[total:total + 1]
        return rows

    for (total, got), (_, full) in zip(run(small.capacity), run(256)):
        keep = small.resident(total)
        assert 16 <= keep <= small.capacity or keep == total
        np.testing.assert_allclose(got[:, :, :keep], full[:, :, total - keep:total], rtol=0, atol=1e-5)


def test_resident_count_and_exact_rewinds():
    w = Windowing(SlidingWindow(window_size=16, cache_slack=16), {"k": 0}, "separate", "cpu", 256, "t")
    assert w.capacity == 32
    # G = C - W + 1 = 17 positions are reclaimed at once when T passes C
    assert [w.resident(t) for t in (1, 32, 33, 49, 50, 66, 67)] == [1, 32, 16, 32, 16, 32, 16]
    w.total = 47                       # resident 30: positions 17..46
    assert w.can_rewind(45)            # resident 28 = 30 - 2: nothing evicted is needed
    assert w.can_rewind(33)
    assert not w.can_rewind(32)        # would need positions 0..16, evicted
    assert not w.can_rewind(20)
    w.total = 30
    assert w.can_rewind(3) and w.can_rewind(0)


@pytest.mark.parametrize("share", [True, False], ids=["shared_buffer", "separate"])
@pytest.mark.parametrize("first_new, keep, rewinds", [
    (10, 13, True),     # 17 tokens: nothing evicted yet
    (40, 45, True),     # 47 tokens, 30 resident; going back 2 needs none of the evicted ones
    (40, 20, False),    # position 4..19 were evicted: the branch is run again from the start
])
def test_continuing_after_a_branch_agrees_with_genai(tmp_path, share, first_new, keep, rewinds):
    bundle = tiny_models.ensure(NAME) if share else _copy(tmp_path, _no_share)
    prompt = tiny_models.load_expected(NAME)["input_ids"]
    pipe = onnxpipe.load(bundle)
    first = pipe.generate(input_ids=prompt, max_new_tokens=first_new, do_sample=False,
                          ignore_eos=True).tokens
    history = prompt + first
    branch = history[:keep] + [5 if history[keep] != 5 else 6]
    new_ids = pipe.conversation.continue_from(branch)
    assert new_ids == (branch[keep:] if rewinds else branch)
    opts = pipe.loaded.options({"do_sample": False, "ignore_eos": True}, 30)
    got = pipe.generation.collect(new_ids, len(branch), opts).tokens
    # onnxruntime-genai only runs this graph with shared buffers: without, it feeds the local
    # layers an empty past, which the op rejects (capacity 0 < window)
    want, want_margins = _genai(tiny_models.ensure(NAME), branch, 30)
    assert_greedy_agrees(got, want, want_margins, FP32_KERNELS)


def test_capacity_follows_genai_per_provider():
    w = SlidingWindow(window_size=16)
    assert capacity(w, "cpu", 256) == capacity(w, "wasm", 256) == 32
    assert capacity(w, "cuda", 256) == 16
    assert capacity(w, "cpu", 20) == 20 and capacity(w, "cpu", 8) == 16   # never below the window
    assert capacity(w, "dml", 256) == 256                                  # no windowed kernel
    assert capacity(SlidingWindow(window_size=16, cache_slack=3), "cuda", 256) == 19


@pytest.mark.parametrize("sliding, message", [
    ({"window_size": 16, "layers": [0, 7]},
     "layers [7] have no KV cache inputs; the session's KV layers are [0, 1, 2, 3]"),
    ({"window_size": 0}, "window_size: expected an integer > 0, found 0"),
    ({"window_size": 16, "cache_slack": -1}, "cache_slack: expected an integer >= 0, found -1"),
    # not the graph's window: buffers of that size would be wrong, and a mistyped huge one allocated whole
    ({"window_size": 17}, "window_size is 17, but the model's GroupQueryAttention nodes use local_window_size 16"),
    ({"window_size": 10**9}, "use local_window_size 16"),
])
def test_bad_windows_are_rejected_at_load(tmp_path, sliding, message):
    bundle = tiny_models.ensure(NAME)
    for f in ("model.onnx", "model.onnx.data"):
        shutil.copy(bundle / f, tmp_path / f)
    doc = {"version": 2,
           "pipeline": {"extends": "autoregressive-decoder",
                        "sessions": {"decoder": {"file": "model.onnx"}},
                        "state": {"kv_cache": {"num_heads": 2, "head_size": 16, "sliding_window": sliding}}},
           "tokens": {"eos": [3]}, "generation": {"max_length": 128}}
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(tmp_path, text=False)
    assert message in info.value.message
    assert info.value.path.startswith("$.pipeline.state.kv_cache.sliding_window")
