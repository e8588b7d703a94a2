"""Rows written over a sequence at a token's positions, in the engine (vision-language glue).

``merge_rows_graph(dtype)``: inputs ``ids`` int64 [b, s], ``token`` int64 [1], ``embeds``
[b, s, d] and ``rows`` [n, d] (n = the number of ``token`` in ``ids``); output ``merged``
[b, s, d]: ``embeds`` with the k-th position holding ``token`` (in row-major order) replaced by
``rows[k]``, as transformers' ``masked_scatter`` of image features does.
"""

from __future__ import annotations

from functools import lru_cache

from .proto import Graph


@lru_cache(maxsize=None)
def merge_rows_graph(dtype: str) -> bytes:
    g = Graph("merge_rows")
    g.input("ids", "int64", ["b", "s"])
    g.input("token", "int64", [1])
    g.input("embeds", dtype, ["b", "s", "d"])
    g.input("rows", dtype, ["n", "d"])
    g.const("flat", [-1], "int64", [1])
    g.const("zero", [0], "int64", [])
    g.const("one", [1], "int64", [])
    g.const("last", [-1], "int64", [1])
    hit = g.node("Equal", ["ids", "token"], "hit")
    flat_hit = g.node("Reshape", [g.node("Cast", [hit], "hit_i", to=7), "flat"], "flat_hit")
    # k-th hit -> row k; other positions gather row 0 and are not used
    index = g.node("Max", [g.node("Sub", [g.node("CumSum", [flat_hit, "zero"], "count"), "one"], "k"),
                           "zero"], "index")
    gathered = g.node("Gather", ["rows", index], "gathered", axis=0)
    shaped = g.node("Reshape", [gathered, g.node("Shape", ["embeds"], "shape")], "placed")
    g.node("Where", [g.node("Unsqueeze", [hit, "last"], "hit3"), shaped, "embeds"], "merged")
    g.output("merged", dtype, ["b", "s", "d"])
    return g.to_bytes()
