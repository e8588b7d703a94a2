"""A flow step's ``merge``: an earlier session's rows written over this step's output at the
positions of a placeholder token (a vision-language model's image features at its image tokens),
by an engine graph (ops/merge.py)."""

from __future__ import annotations

from ..errors import InputError
from ..ops.merge import merge_rows_graph
from .wiring import StepPlan


def merge_features(backend, values: dict, plan: StepPlan, outputs: dict, inputs) -> None:
    """``merge``: an earlier session's rows written over this step's output at the
    positions of the token (image features at the image tokens)."""
    merge = plan.step.merge
    token = plan.merge_token
    if token is None:
        return   # no placeholder id declared: the bundle takes no images
    given = inputs.get("input_ids")
    if not isinstance(given, tuple):
        return   # ids a loop made in the engine (beam steps): no images there (refused with beams)
    ids, shape = given
    count = sum(1 for i in ids if i == token)
    if not count:
        return   # nothing to place (text, or the decode steps after the prompt)
    rows = values.get(plan.merge_source)
    if rows is None:
        raise InputError(f"the prompt has {count} image token(s) (id {token}) but no image was given")
    have = backend.shape(rows)[0]
    if have != count:
        raise InputError(f'the prompt has {count} image token(s) (id {token}) but "{merge.from_}" has '
                         f"{have} rows for them")
    target = outputs[merge.into]
    dtype = plan.session.outputs[merge.into].dtype
    graph = backend.open_graph(merge_rows_graph(dtype), plan.session.provider)
    feeds = {"ids": backend.tensor(ids, "int64", shape), "token": backend.tensor([token], "int64", (1,)),
             "embeds": target, "rows": rows}
    outputs[merge.into] = backend.run(graph, feeds, ["merged"])["merged"]
    backend.dispose_many([feeds["ids"], feeds["token"], target])
