"""Small graphs for KV-cache state: rewind, grow and zero-fill inside the engine.

All are shape-generic over rank-4 tensors [B, H, T, D] (batch, heads, sequence, head size)
and take the element dtype as a parameter ("float32" or "float16"). Each factory returns ONNX
model bytes, cached per argument, so Python never allocates or copies the large buffers.
"""

from __future__ import annotations

from functools import lru_cache

from .proto import Graph, Tensor

__all__ = ["gather_batch_many_graph", "grow_seq_graph", "slice_seq_many_graph", "zeros_graph"]

_CACHE_DTYPES = ("float32", "float16")
_DIMS_IN = ["batch", "heads", "seq", "head_dim"]


def _check(dtype: str) -> None:
    if dtype not in _CACHE_DTYPES:
        raise ValueError(f"dtype: expected one of {_CACHE_DTYPES}, got {dtype!r}")


@lru_cache(maxsize=None)
def slice_seq_many_graph(dtype: str, count: int) -> bytes:
    """Rewind ``count`` caches in one run (one engine call, not one per tensor: in the browser
    each call crosses from Python to JavaScript): ``y{i} = x{i}[:, :, :length, :]``.

    Inputs: ``x0`` .. ``x{count-1}`` [B, H, T, D] (each its own dims), ``length`` int64[1].
    Outputs: ``y0`` .. ``y{count-1}`` [B, H, length, D].
    """
    _check(dtype)
    if count < 1:
        raise ValueError(f"count: expected >= 1, got {count!r}")
    g = Graph("slice_seq_many")
    g.input("length", "int64", [1])
    g.const("start0", [0], "int64", [1])
    g.const("axis2", [2], "int64", [1])
    for i in range(count):
        dims = [f"{d}_{i}" for d in _DIMS_IN]
        g.input(f"x{i}", dtype, dims)
        g.node("Slice", [f"x{i}", "start0", "length", "axis2"], f"y{i}")
        g.output(f"y{i}", dtype, [dims[0], dims[1], "length", dims[3]])
    return g.to_bytes()


@lru_cache(maxsize=None)
def gather_batch_many_graph(dtype: str, count: int) -> bytes:
    """Reorder ``count`` caches along the batch axis in one run (beam search: each beam takes
    the cache of the beam it continues; [0] * n widens a one-row prefill to n beams):
    ``y{i} = x{i}[index]``.

    Inputs: ``x0`` .. ``x{count-1}`` [B, H, T, D] (each its own dims), ``index`` int64[N] (< B).
    Outputs: ``y0`` .. ``y{count-1}`` [N, H, T, D].
    """
    _check(dtype)
    if count < 1:
        raise ValueError(f"count: expected >= 1, got {count!r}")
    g = Graph("gather_batch_many")
    g.input("index", "int64", ["rows"])
    for i in range(count):
        dims = [f"{d}_{i}" for d in _DIMS_IN]
        g.input(f"x{i}", dtype, dims)
        g.node("Gather", [f"x{i}", "index"], f"y{i}", axis=0)
        g.output(f"y{i}", dtype, ["rows"] + dims[1:])
    return g.to_bytes()


@lru_cache(maxsize=None)
def grow_seq_graph(dtype: str = "float32") -> bytes:
    """Grow a static buffer: ``y[:, :, :T, :] = x`` and zeros up to ``capacity``.

    Inputs: ``x`` [B, H, T, D], ``capacity`` int64[1] (>= T).
    Output: ``y`` [B, H, capacity, D].
    """
    _check(dtype)
    g = Graph("grow_seq")
    g.input("x", dtype, _DIMS_IN)
    g.input("capacity", "int64", [1])
    g.const("pads_head", [0, 0, 0, 0, 0, 0], "int64", [6])  # all begins, then B and H ends
    g.const("pads_tail", [0], "int64", [1])  # D end
    seq = g.node("Shape", ["x"], "seq_len", start=2, end=3)
    extra = g.node("Sub", ["capacity", seq], "extra")
    pads = g.node("Concat", ["pads_head", extra, "pads_tail"], "pads", axis=0)
    g.node("Pad", ["x", pads], "y", mode="constant")
    g.output("y", dtype, ["batch", "heads", "capacity", "head_dim"])
    return g.to_bytes()


@lru_cache(maxsize=None)
def zeros_graph(dtype: str = "float32") -> bytes:
    """A zero tensor of a given shape, e.g. an empty cache [B, H, 0, D].

    Input: ``shape`` int64[4]. Output: ``y`` of that shape, all zeros.
    """
    _check(dtype)
    g = Graph("zeros")
    g.input("shape", "int64", [4])
    g.node("ConstantOfShape", ["shape"], "y", value=Tensor([0], dtype, [1]))
    g.output("y", dtype, ["batch", "heads", "seq", "head_dim"])
    return g.to_bytes()
