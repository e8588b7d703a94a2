"""A flow step's ``merge``: an earlier session's rows written over this step's output at the
positions of a placeholder token (a vision-language model's image features at its image tokens),
by an engine graph (ops/merge.py); or, when ``into`` names an input, fed to the session, which
merges them itself (onnxruntime-genai's embedding sessions). A list of them merges several
sources, each at its own token (Phi-4-multimodal's image and audio features)."""

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


def _count(token: int | None, inputs) -> int:
    """How many times ``token`` is in this run's host input_ids (0 without a token, or with ids
    a loop made in the engine: no images there)."""
    given = inputs.get("input_ids")
    if token is None or not isinstance(given, tuple):
        return 0
    return sum(1 for i in given[0] if i == token)


def _rows(backend, values: dict, entry, count: int):
    """The source's rows for ``count`` tokens, checked."""
    merge, source, token = entry
    rows = values.get(source)
    if rows is None:
        raise _missing(count, token, merge.token)
    have = backend.shape(rows)[0]
    if have != count:
        raise _unmatched(count, token, merge.token, merge.from_, have)
    return rows


def feed_features(backend, values: dict, plan: StepPlan, inputs) -> dict:
    """The entries of ``merge`` into inputs: {input: (the tensor fed, whether it is ours to
    free)}. Each takes its source's rows on a run whose ids hold its token (one row per token),
    none ([0, dims...]) on every other run, as onnxruntime-genai feeds an embedding session's
    image_features and audio_features."""
    fed: dict = {}
    try:
        for entry in plan.merges:
            into = entry[0].into
            if into not in plan.session.inputs:
                continue
            count = _count(entry[2], inputs)
            if count:
                fed[into] = (_rows(backend, values, entry, count), False)
            else:
                info = plan.session.inputs[into]
                fed[into] = (backend.tensor([], info.dtype, (0, *info.shape[1:])), True)
    except InputError:
        backend.dispose_many([t for t, ours in fed.values() if ours])
        raise
    return fed


def merge_features(backend, values: dict, plan: StepPlan, outputs: dict, inputs) -> None:
    """The entries of ``merge`` into outputs: each source's rows written over this step's
    output at the positions of its token (image features at the image tokens)."""
    for entry in plan.merges:
        merge, _, token = entry
        if merge.into in plan.session.inputs:
            continue
        count = _count(token, inputs)
        if not count:
            continue   # nothing to place (text, or the decode steps after the prompt)
        rows = _rows(backend, values, entry, count)
        ids, shape = inputs["input_ids"]
        target = outputs[merge.into]
        dtype = plan.session.outputs[merge.into].dtype
        graph = backend.open_graph(merge_rows_graph(dtype), plan.session.provider)
        feeds = {"ids": backend.tensor(ids, "int64", shape), "token": backend.tensor([token], "int64", (1,)),
                 "embeds": target, "rows": rows}
        outputs[merge.into] = backend.run(graph, feeds, ["merged"])["merged"]
        backend.dispose_many([feeds["ids"], feeds["token"], target])
