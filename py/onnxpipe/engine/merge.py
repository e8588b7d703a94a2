"""A flow step's ``merge``: an earlier session's rows written over this step's output at the
positions of a placeholder token (a vision-language model's image features at its image tokens),
by an engine graph (ops/merge.py); or, when ``into`` names an input, fed to the session, which
merges them itself (onnxruntime-genai's embedding sessions)."""

from __future__ import annotations

from ..errors import InputError
from ..ops.merge import merge_rows_graph
from .wiring import StepPlan


# what a merge token's rows are made from, by its tokens.extra key: (the token's name, the input)
_PLACED = {"audio_token": ("audio", "audio clip (audios=)")}


def _missing(count: int, token: int, key: str) -> InputError:
    noun, item = _PLACED.get(key, ("image", "image"))
    return InputError(f"the prompt has {count} {noun} token(s) (id {token}) but no {item} was given")


def _unmatched(count: int, token: int, key: str, source: str, have: int) -> InputError:
    noun = _PLACED.get(key, ("image",))[0]
    return InputError(f'the prompt has {count} {noun} token(s) (id {token}) but "{source}" has {have} rows for them')


def _placeholders(plan: StepPlan, inputs):
    """(ids, shape, count of the token) of this run's host input_ids, or None."""
    token = plan.merge_token
    given = inputs.get("input_ids")
    if token is None or not isinstance(given, tuple):
        return None   # no placeholder id, or ids a loop made in the engine (no images there)
    ids, shape = given
    return ids, shape, sum(1 for i in ids if i == token)


def feed_features(backend, values: dict, plan: StepPlan, inputs):
    """``merge`` into an input: (the tensor fed, whether it is ours to free). The rows on a run
    whose ids hold the token (one row per token), none ([0, dims...]) on every other run, as
    onnxruntime-genai feeds an embedding session's image_features."""
    merge = plan.step.merge
    found = _placeholders(plan, inputs)
    count = found[2] if found else 0
    rows = values.get(plan.merge_source)
    if count:
        if rows is None:
            raise _missing(count, plan.merge_token, merge.token)
        have = backend.shape(rows)[0]
        if have != count:
            raise _unmatched(count, plan.merge_token, merge.token, merge.from_, have)
        return rows, False
    info = plan.session.inputs[merge.into]
    return backend.tensor([], info.dtype, (0, *info.shape[1:])), True


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
        raise _missing(count, token, merge.token)
    have = backend.shape(rows)[0]
    if have != count:
        raise _unmatched(count, token, merge.token, merge.from_, have)
    target = outputs[merge.into]
    dtype = plan.session.outputs[merge.into].dtype
    graph = backend.open_graph(merge_rows_graph(dtype), plan.session.provider)
    feeds = {"ids": backend.tensor(ids, "int64", shape), "token": backend.tensor([token], "int64", (1,)),
             "embeds": target, "rows": rows}
    outputs[merge.into] = backend.run(graph, feeds, ["merged"])["merged"]
    backend.dispose_many([feeds["ids"], feeds["token"], target])
