"""Small graphs that move KV-cache rows of a batch (loops/batched.py): a sequence's cache joins
as a new batch row, the sequence axis is cropped or padded for every row at once, logits rows
are picked per sampler group. Shape-generic over rank-4 caches [B, H, T, D]; one engine call
per dtype for all of a model's caches, so nothing passes through Python.
"""

from __future__ import annotations

from functools import lru_cache

from .proto import Graph

__all__ = ["crop_seq_many_graph", "gather_rows_graph", "join_rows_many_graph", "pad_seq_many_graph"]

_CACHE_DTYPES = ("float32", "float16")
_DIMS = ["batch", "heads", "seq", "head_dim"]


def _check(dtype: str, count: int) -> None:
    if dtype not in _CACHE_DTYPES:
        raise ValueError(f"dtype: expected one of {_CACHE_DTYPES}, got {dtype!r}")
    if count < 1:
        raise ValueError(f"count: expected >= 1, got {count!r}")


@lru_cache(maxsize=None)
def join_rows_many_graph(dtype: str, count: int) -> bytes:
    """``y{i} = concat(pad(x{i}, pads_x), pad(r{i}, pads_r))`` on the batch axis: the rows of
    ``r{i}`` [R, H, L, D] join the batch ``x{i}`` [B, H, T, D] once both are padded (with zeros,
    on the sequence axis) to one length.

    Inputs: ``x{i}``, ``r{i}``, ``pads_x`` and ``pads_r`` int64[8] (ONNX Pad's begins then ends).
    Outputs: ``y{i}`` [B + R, H, T', D].
    """
    _check(dtype, count)
    g = Graph("join_rows_many")
    g.input("pads_x", "int64", [8])
    g.input("pads_r", "int64", [8])
    for i in range(count):
        g.input(f"x{i}", dtype, [f"{d}_{i}" for d in _DIMS])
        g.input(f"r{i}", dtype, [f"{d}_r{i}" for d in _DIMS])
        a = g.node("Pad", [f"x{i}", "pads_x"], f"px{i}", mode="constant")
        b = g.node("Pad", [f"r{i}", "pads_r"], f"pr{i}", mode="constant")
        g.node("Concat", [a, b], f"y{i}", axis=0)
        g.output(f"y{i}", dtype, ["rows", f"heads_{i}", "length", f"head_dim_{i}"])
    return g.to_bytes()


@lru_cache(maxsize=None)
def crop_seq_many_graph(dtype: str, count: int) -> bytes:
    """``y{i} = x{i}[:, :, start:end, :]`` for ``count`` caches in one run.

    Inputs: ``x{i}`` [B, H, T, D], ``start`` and ``end`` int64[1]. Outputs: ``y{i}``.
    """
    _check(dtype, count)
    g = Graph("crop_seq_many")
    g.input("start", "int64", [1])
    g.input("end", "int64", [1])
    g.const("axis2", [2], "int64", [1])
    for i in range(count):
        dims = [f"{d}_{i}" for d in _DIMS]
        g.input(f"x{i}", dtype, dims)
        g.node("Slice", [f"x{i}", "start", "end", "axis2"], f"y{i}")
        g.output(f"y{i}", dtype, [dims[0], dims[1], "length", dims[3]])
    return g.to_bytes()


@lru_cache(maxsize=None)
def pad_seq_many_graph(dtype: str, count: int) -> bytes:
    """``y{i} = pad(x{i}, pads)`` with zeros for ``count`` caches in one run.

    Inputs: ``x{i}`` [B, H, T, D], ``pads`` int64[8]. Outputs: ``y{i}``.
    """
    _check(dtype, count)
    g = Graph("pad_seq_many")
    g.input("pads", "int64", [8])
    for i in range(count):
        dims = [f"{d}_{i}" for d in _DIMS]
        g.input(f"x{i}", dtype, dims)
        g.node("Pad", [f"x{i}", "pads"], f"y{i}", mode="constant")
        g.output(f"y{i}", dtype, [dims[0], dims[1], "length", dims[3]])
    return g.to_bytes()


@lru_cache(maxsize=None)
def gather_rows_graph(dtype: str, rank: int) -> bytes:
    """``y = x[index]`` along axis 0 (the logits rows of one sampler group).

    Inputs: ``x`` of ``rank`` dims, ``index`` int64[N]. Output: ``y``.
    """
    if dtype not in _CACHE_DTYPES:
        raise ValueError(f"dtype: expected one of {_CACHE_DTYPES}, got {dtype!r}")
    g = Graph("gather_rows")
    dims = [f"d{j}" for j in range(rank)]
    g.input("x", dtype, dims)
    g.input("index", "int64", ["rows"])
    g.node("Gather", ["x", "index"], "y", axis=0)
    g.output("y", dtype, ["rows"] + dims[1:])
    return g.to_bytes()
