"""The generic pipeline executor: runs a phase of the flow, binding inputs per the plan.

It knows sessions, wires and state components, never what model it runs.
"""

from __future__ import annotations

from typing import Any

from ..backends.base import Items
from ..errors import InputError
from ..state.base import StepContext
from . import per_image
from .merge import feed_features, merge_features
from .plugin import PluginCall
from .wiring import Plan, StepPlan

_MISSING = object()


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
                  new_length: int = 0, batch: int = 1) -> dict[str, Any]:
        """Run every step of ``phase``; ``inputs`` are host values (flat list, shape), or
        engine tensors a loop made itself (in the session input's dtype).

        ``new_length`` is how many positions this call adds to the state (the step phase of
        an autoregressive loop); ``batch`` how many sequences run side by side (beam search);
        returns the pipeline outputs produced in this phase.
        """
        ctx = StepContext(self.length, new_length, batch, inputs)
        made: dict[tuple[str, str], Any] = {}
        kind = "prompt" if new_length > 1 else "token_gen"   # a step's "on" picks among them
        ran: set[str] = set()
        for plan in self.plan.phases[phase]:
            if plan.step.on != "any" and plan.step.on != kind:
                continue
            for index in range(plan.step.repeat):
                self._run_step(plan, index, inputs, made, ctx, phase, ran)
            ran.add(plan.step.run)
        self.length += ctx.new_length   # a plugin may have lengthened the sequence
        options = self.plan.output_options
        out = {}
        for name, src in self.plan.pipeline_outputs.items():
            if name in options:
                src = next((o for o in options[name] if o[0] in ran), src)
            if src in self.values and src[0] in {p.step.run for p in self.plan.phases[phase]}:
                out[name] = self.values[src]
        return out

    def _run_step(self, plan: StepPlan, index: int, inputs, made, ctx: StepContext, phase: str,
                  ran: set[str]) -> None:
        backend = self.backend
        feeds: dict[str, Any] = {}
        bound: dict[str, Any] = {}
        infos = plan.session.inputs
        if plan.step.loop == "per_image" and per_image.no_items(plan, inputs):
            return   # no items (a prompt without images): the step makes nothing
        for name, kind, key in plan.feeds:
            if kind == "session":
                feeds[name] = self.values[key]
                continue
            if kind == "either":   # the latest producer that ran in this pass (else the last, always run)
                feeds[name] = self.values[next((k for k in key if k[0] in ran), key[-1])]
                continue
            value = inputs.get(key, _MISSING)
            if value is _MISSING:   # a wire from inputs.<key> declares an input only the caller gives
                raise InputError(f'pipeline input "{key}" (wired to {plan.step.run}.{name}) was not given: '
                                 f'pass it, e.g. inputs={{"{key}": (values, shape)}}')
            if isinstance(value, Items) or not isinstance(value, tuple):   # per image; or an engine tensor
                feeds[name] = value
            else:
                dtype = infos[name].dtype
                cached = made.get((key, dtype))
                if cached is None:
                    values, shape = value
                    cached = made[(key, dtype)] = backend.tensor(values, dtype, shape)
                feeds[name] = cached
        if index > 0:
            for name, output in plan.self_feeds.items():
                feeds[name] = self.values[(plan.step.run, output)]
        if plan.counter_dtype is not None:
            shape = (1,) if len(infos[plan.step.counter].shape) == 1 else ()
            feeds[plan.step.counter] = backend.tensor([index], plan.counter_dtype, shape)
        fed_rows = None   # only steps that merge features allocate (not the decoder's per-token run)
        if plan.merges:
            fed_rows = []
            for name, (rows, ours) in feed_features(backend, self.values, plan, inputs).items():
                feeds[name] = rows
                if ours:
                    fed_rows.append(rows)
        hook = self._before_run
        plugin_made = []
        if hook is not None:
            gathered = dict(feeds)
            hook(PluginCall(plan.step.run, phase, feeds, inputs, ctx))
            plugin_made = [t for n, t in feeds.items() if gathered.get(n) is not t]
        for comp in plan.state:
            comp.bind(plan.step.run, feeds, bound, ctx)
        if any(isinstance(v, Items) for v in feeds.values()):
            if plan.step.loop != "per_image":
                raise InputError(f'flow step "{plan.step.run}" is given one value per image: it needs '
                                 f'"loop": "per_image"')
            outputs = per_image.run_items(backend, plan, feeds)
        elif plan.step.loop == "per_image":
            outputs = per_image.run_per_item(backend, plan, feeds, inputs)
        else:
            outputs = backend.run(plan.session, feeds, plan.outputs, bound)
        if plan.merges:
            backend.dispose_many(fed_rows)
            merge_features(backend, self.values, plan, outputs, inputs)
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

    def reorder(self, index: list[int]) -> None:
        """Batch row i of every state component becomes row ``index[i]`` (beam search)."""
        for comp in self.components:
            comp.reorder(index)

    def cannot_reorder(self) -> str | None:
        """Why the state's rows can't be reordered per beam, or None when they can."""
        return next((why for why in (c.cannot_reorder() for c in self.components) if why), None)

    def reset(self) -> None:
        for comp in self.components:
            comp.reset()
        for value in self.values.values():
            self.backend.dispose(value)
        self.values.clear()
        self.length = 0
