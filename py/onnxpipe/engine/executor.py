"""The generic pipeline executor: runs a phase of the flow, binding inputs per the plan.

It knows sessions, wires and state components, never what model it runs.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..ops import tensor as tensor_ops
from ..state.base import StepContext
from .plugin import PluginCall
from .wiring import Plan, StepPlan


class Executor:
    def __init__(self, backend, plan: Plan, components: list):
        self.backend = backend
        self.plan = plan
        self.components = components
        self.values: dict[tuple[str, str], Any] = {}   # latest wired session outputs
        self.length = 0                                # positions held by the state
        self.plugin = None                             # engine/plugin.py hooks, if the bundle has one
        self._before_run = None                        # its before_run hook, looked up once

    def use_plugin(self, plugin) -> None:
        self.plugin = plugin
        self._before_run = getattr(plugin, "before_run", None)

    def has_phase(self, phase: str) -> bool:
        return bool(self.plan.phases[phase])

    def run_phase(self, phase: str, inputs: dict[str, tuple[list, tuple[int, ...]]],
                  new_length: int = 0) -> dict[str, Any]:
        """Run every step of ``phase``; ``inputs`` are host values (flat list, shape), or
        engine tensors a loop made itself (in the session input's dtype).

        ``new_length`` is how many positions this call adds to the state (the step phase of
        an autoregressive loop); returns the pipeline outputs produced in this phase.
        """
        ctx = StepContext(self.length, new_length)
        made: dict[tuple[str, str], Any] = {}
        for plan in self.plan.phases[phase]:
            for index in range(plan.step.repeat):
                self._run_step(plan, index, inputs, made, ctx, phase)
        self.length += ctx.new_length   # a plugin may have lengthened the sequence
        return {name: self.values[src] for name, src in self.plan.pipeline_outputs.items()
                if src in self.values and src[0] in {p.step.run for p in self.plan.phases[phase]}}

    def _run_step(self, plan: StepPlan, index: int, inputs, made, ctx: StepContext, phase: str) -> None:
        backend = self.backend
        feeds: dict[str, Any] = {}
        bound: dict[str, Any] = {}
        infos = plan.session.inputs
        for name, kind, key in plan.feeds:
            if kind == "session":
                feeds[name] = self.values[key]
            elif not isinstance(inputs[key], tuple):   # an engine tensor a loop made itself
                feeds[name] = inputs[key]
            else:
                dtype = infos[name].dtype
                cached = made.get((key, dtype))
                if cached is None:
                    values, shape = inputs[key]
                    cached = made[(key, dtype)] = backend.tensor(values, dtype, shape)
                feeds[name] = cached
        if index > 0:
            for name, output in plan.self_feeds.items():
                feeds[name] = self.values[(plan.step.run, output)]
        if plan.counter_dtype is not None:
            shape = (1,) if len(infos[plan.step.counter].shape) == 1 else ()
            feeds[plan.step.counter] = backend.tensor([index], plan.counter_dtype, shape)
        hook = self._before_run
        plugin_made = []
        if hook is not None:
            gathered = dict(feeds)
            hook(PluginCall(plan.step.run, phase, feeds, inputs, ctx))
            plugin_made = [t for n, t in feeds.items() if gathered.get(n) is not t]
        for comp in plan.state:
            comp.bind(plan.step.run, feeds, bound, ctx)
        if plan.step.loop == "per_image":
            outputs = self._run_per_item(plan, feeds, inputs)
        else:
            outputs = backend.run(plan.session, feeds, plan.outputs, bound)
        if plugin_made:   # tensors the plugin made for this run are ours to free
            backend.dispose_many(plugin_made)
        for comp in plan.state:
            comp.update(plan.step.run, outputs, ctx)
        run = plan.step.run
        values = self.values
        for name in plan.keep:
            key = (run, name)
            old = values.get(key)
            if old is not None and old is not outputs[name]:
                backend.dispose(old)
            values[key] = outputs[name]

    def _run_per_item(self, plan: StepPlan, feeds: dict, inputs) -> dict:
        """``loop: per_image``: run once per item of ``loop_over`` (cropped per ``dynamic_shape``),
        then join each output along dim 0."""
        backend, step = self.backend, plan.step
        whole = feeds[step.loop_over]
        info = plan.session.inputs[step.loop_over]
        shape = backend.shape(whole)
        dims = list(step.dynamic_shape.apply_to_dims) if step.dynamic_shape else []
        sizes = self._item_sizes(step, feeds, inputs, shape[0], len(dims))
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

    def _item_sizes(self, step, feeds, inputs, count: int, width: int) -> list[list[int]]:
        if not width:
            return [[] for _ in range(count)]
        source = step.dynamic_shape.source
        if source in feeds:
            flat = self.backend.to_list(feeds[source])
        elif source in inputs:
            flat = list(inputs[source][0])
        else:
            raise InputError(f'flow step "{step.run}": dynamic_shape.source "{source}" was not given '
                             f"(pass it as a pipeline input)")
        if len(flat) != count * width:
            raise InputError(f'"{source}" has {len(flat)} values; expected {count} items x {width} sizes')
        return [[int(v) for v in flat[i * width:(i + 1) * width]] for i in range(count)]

    # ---- state -------------------------------------------------------------------------------

    def rewind(self, length: int) -> bool:
        """Cut every state component back to ``length`` positions; False if one can't."""
        if length == self.length:
            return True
        if not all(comp.rewind(length) for comp in self.components):
            return False
        self.length = length
        return True

    def cannot_rewind(self) -> str | None:
        """Why the state can't drop positions it just took in, or None when it can."""
        return next((why for why in (c.cannot_rewind() for c in self.components) if why), None)

    def reset(self) -> None:
        for comp in self.components:
            comp.reset()
        for value in self.values.values():
            self.backend.dispose(value)
        self.values.clear()
        self.length = 0
