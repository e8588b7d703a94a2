"""Rank-generic tensor glue the executor runs in the engine: slice one item, concatenate items.

Used by ``loop: per_image`` flow steps, which run a session once per item of a batch and
join the results, so per-item tensors never pass through Python.
"""

from __future__ import annotations

from functools import lru_cache

from .proto import Graph


def _dims(prefix: str, rank: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(rank)]


@lru_cache(maxsize=None)
def slice_graph(dtype: str, rank: int) -> bytes:
    """``y = x[starts:ends]`` along ``axes``. Inputs x, starts, ends, axes (int64 [k])."""
    g = Graph("slice")
    g.input("x", dtype, _dims("d", rank))
    for name in ("starts", "ends", "axes"):
        g.input(name, "int64", ["k"])
    g.node("Slice", ["x", "starts", "ends", "axes"], "y")
    g.output("y", dtype, _dims("o", rank))
    return g.to_bytes()


@lru_cache(maxsize=None)
def concat_graph(dtype: str, rank: int, count: int, axis: int = 0) -> bytes:
    """``y = concat(x0 .. x{count-1}, axis)``."""
    g = Graph("concat")

    def dims(i: str) -> list[str]:
        out = _dims("d", rank)
        out[axis] = f"n{i}"
        return out

    names = [g.input(f"x{i}", dtype, dims(str(i))) for i in range(count)]
    g.node("Concat", names, "y", axis=axis)
    g.output("y", dtype, dims(""))
    return g.to_bytes()
