"""The generic pipeline executor: runs a phase of the flow, binding inputs per the plan.

It knows sessions, wires and state components, never what model it runs.
"""

from __future__ import annotations

from typing import Any

from ..state.base import StepContext
from .wiring import Plan, StepPlan


class Executor:
    def __init__(self, backend, plan: Plan, components: list):
        self.backend = backend
        self.plan = plan
        self.components = components
        self.values: dict[tuple[str, str], Any] = {}   # latest wired session outputs
        self.length = 0                                # positions held by the state
        self.final_outputs: dict[str, Any] = {}        # what the final phase produced last

    def has_phase(self, phase: str) -> bool:
        return bool(self.plan.phases[phase])

    def run_phase(self, phase: str, inputs: dict[str, tuple[list, tuple[int, ...]]],
                  new_length: int = 0) -> dict[str, Any]:
        """Run every step of ``phase``; ``inputs`` are host values (flat list, shape).

        ``new_length`` is how many positions this call adds to the state (the step phase of
        an autoregressive loop); returns the pipeline outputs produced in this phase.
        """
        ctx = StepContext(self.length, new_length)
        made: dict[tuple[str, str], Any] = {}
        for plan in self.plan.phases[phase]:
            for index in range(plan.step.repeat):
                self._run_step(plan, index, inputs, made, ctx)
        self.length += new_length
        return {name: self.values[src] for name, src in self.plan.pipeline_outputs.items()
                if src in self.values and src[0] in {p.step.run for p in self.plan.phases[phase]}}

    def _run_step(self, plan: StepPlan, index: int, inputs, made, ctx: StepContext) -> None:
        backend = self.backend
        feeds: dict[str, Any] = {}
        bound: dict[str, Any] = {}
        infos = plan.session.inputs
        for name, kind, key in plan.feeds:
            if kind == "session":
                feeds[name] = self.values[key]
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
        for comp in plan.state:
            comp.bind(plan.step.run, feeds, bound, ctx)
        outputs = backend.run(plan.session, feeds, plan.outputs, bound)
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

    def reset(self) -> None:
        for comp in self.components:
            comp.reset()
        for value in self.values.values():
            self.backend.dispose(value)
        self.values.clear()
        self.final_outputs = {}
        self.length = 0
