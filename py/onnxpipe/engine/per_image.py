"""``loop: per_image`` flow steps: a session run once per item, its outputs joined along dim 0.

Items come either from one batched input cropped per ``dynamic_shape`` (``run_per_item``) or
as one host value per item, each its own shape (``run_items``: an image front end's pixel rows).
"""

from __future__ import annotations

from ..backends.base import Items
from ..errors import InputError
from ..ops import tensor as tensor_ops
from .wiring import StepPlan


def run_per_item(backend, plan: StepPlan, feeds: dict, inputs) -> dict:
    """``loop: per_image``: run once per item of ``loop_over`` (cropped per ``dynamic_shape``),
    then join each output along dim 0."""
    step = plan.step
    whole = feeds[step.loop_over]
    info = plan.session.inputs[step.loop_over]
    shape = backend.shape(whole)
    dims = list(step.dynamic_shape.apply_to_dims) if step.dynamic_shape else []
    sizes = _item_sizes(backend, step, feeds, inputs, shape[0], len(dims))
    slicer = backend.open_graph(tensor_ops.slice_graph(info.dtype, len(shape)), plan.session.provider)
    parts: dict[str, list] = {name: [] for name in plan.outputs}
    for i in range(shape[0]):
        bounds = {"starts": [i] + [0] * len(dims), "ends": [i + 1] + sizes[i], "axes": [0] + dims}
        feeds_i = {k: backend.tensor(v, "int64", (len(v),)) for k, v in bounds.items()}
        item = backend.run(slicer, dict(feeds_i, x=whole), ["y"])["y"]
        out = backend.run(plan.session, dict(feeds, **{step.loop_over: item}), plan.outputs)
        backend.dispose(item)
        for name in plan.outputs:
            parts[name].append(out[name])
    return _join(backend, plan, parts)


def no_items(plan: StepPlan, inputs) -> bool:
    """The pipeline input a per_image step loops over was not given, or has no items."""
    key = next((k for n, kind, k in plan.feeds if kind == "pipeline" and n == plan.step.loop_over), None)
    return key is not None and (key not in inputs or (isinstance(inputs[key], Items) and not inputs[key]))


def run_items(backend, plan: StepPlan, feeds: dict) -> dict:
    """``loop: per_image`` over inputs given one value per item (each image its own shape):
    run i takes item i of each, then each output is joined along dim 0."""
    lists = {name: v for name, v in feeds.items() if isinstance(v, Items)}
    count = {len(v) for v in lists.values()}
    if len(count) != 1:
        raise InputError(f'flow step "{plan.step.run}": per-image inputs differ in length '
                         f'({", ".join(f"{n}: {len(v)}" for n, v in lists.items())})')
    parts: dict[str, list] = {name: [] for name in plan.outputs}
    for i in range(count.pop()):
        item_feeds = dict(feeds)
        for name, items in lists.items():
            values, shape = items[i]
            item_feeds[name] = backend.tensor(values, plan.session.inputs[name].dtype, shape)
        out = backend.run(plan.session, item_feeds, plan.outputs)
        backend.dispose_many([item_feeds[name] for name in lists])
        for name in plan.outputs:
            parts[name].append(out[name])
    return _join(backend, plan, parts)


def _join(backend, plan: StepPlan, parts: dict[str, list]) -> dict:
    """Each output's per-item tensors joined along dim 0 (and freed)."""
    joined = {}
    for name, items in parts.items():
        out_info = plan.session.outputs[name]
        rank = len(backend.shape(items[0]))
        graph = backend.open_graph(tensor_ops.concat_graph(out_info.dtype, rank, len(items)),
                                   plan.session.provider)
        joined[name] = backend.run(graph, {f"x{i}": t for i, t in enumerate(items)}, ["y"])["y"]
        for t in items:
            backend.dispose(t)
    return joined


def _item_sizes(backend, step, feeds, inputs, count: int, width: int) -> list[list[int]]:
    if not width:
        return [[] for _ in range(count)]
    source = step.dynamic_shape.source
    if source in feeds:
        flat = backend.to_list(feeds[source])
    elif source in inputs:
        flat = list(inputs[source][0])
    else:
        raise InputError(f'flow step "{step.run}": dynamic_shape.source "{source}" was not given '
                         f"(pass it as a pipeline input)")
    if len(flat) != count * width:
        raise InputError(f'"{source}" has {len(flat)} values; expected {count} items x {width} sizes')
    return [[int(v) for v in flat[i * width:(i + 1) * width]] for i in range(count)]
