"""KV dims the session leaves symbolic: detected in the graph, taken from kv_cache when given,
and an error that says where it looked when neither answers. The model is one the reader cannot
see through (an Erf after the Concat of past and new), opened by onnxruntime for real."""

from __future__ import annotations

import pytest

from onnxpipe.backends.native import NativeBackend
from onnxpipe.config.schema import KVCacheSpec
from onnxpipe.errors import ConfigError
from onnxpipe.ops.proto import Graph
from onnxpipe.state.kv_cache import KVCache, make_kv_cache


def opaque_decoder(path, head_dim="kv_dim") -> str:
    g = Graph("opaque")
    g.input("past_key_values.0.key", "float32", ["batch", 2, "past", head_dim])
    g.input("new_key", "float32", ["batch", 2, "seq", head_dim])
    g.node("Concat", ["past_key_values.0.key", "new_key"], "joined", axis=2)
    g.node("Erf", ["joined"], "present.0.key")
    g.output("present.0.key", "float32", ["batch", 2, "total", head_dim])
    path.write_bytes(g.to_bytes())
    return str(path)


def kv_cache(path: str, **spec) -> KVCache:
    backend = NativeBackend()
    session = backend.open_session("decoder", path, ["cpu"], {})
    return make_kv_cache(backend, session, KVCacheSpec(**spec), 64, "pipeline.json")


def test_undetectable_head_size_asks_for_it_and_says_where_it_looked(tmp_path):
    with pytest.raises(ConfigError) as info:
        kv_cache(opaque_decoder(tmp_path / "m.onnx"))
    exc = info.value
    assert exc.path == "$.pipeline.state.kv_cache.head_size"
    for part in ("past_key_values.0.key", "kv_cache.head_size", "attention nodes", "traced back"):
        assert part in exc.detail, exc.detail


def test_given_head_size_is_used_and_the_graph_never_read(tmp_path):
    kv = kv_cache(opaque_decoder(tmp_path / "m.onnx"), head_size=8)
    assert kv._dims(kv.slots[0]) == [None, 2, -1, 8]
    assert not kv._graph.read


def test_fixed_dims_need_no_graph_and_checked_against_given_values(tmp_path):
    path = opaque_decoder(tmp_path / "m.onnx", head_dim=8)
    kv = kv_cache(path, num_heads=2)
    assert kv._dims(kv.slots[0]) == [None, 2, -1, 8] and not kv._graph.read
    with pytest.raises(ConfigError) as info:
        kv_cache(path, num_heads=4)
    assert info.value.path == "$.pipeline.state.kv_cache.num_heads"
    assert "4" in info.value.detail and "fixes 2" in info.value.detail
