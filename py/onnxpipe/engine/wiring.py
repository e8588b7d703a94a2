"""Dataflow planning: for every flow step, where each session input comes from.

Sources, in order of precedence: an explicit wire; a state component; an output of the
same name from a session that runs earlier; a pipeline input the loop supplies. Anything
else is a load-time error, as are wires to tensors a session doesn't have. Where the latest
earlier producer runs only on some passes (a step's ``on``), the input takes the latest one
that ran in the pass ("either" feeds), checked at load to cover every pass that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.schema import FLOW_PHASES, FlowStep, PipelineSpec
from ..config.validate import split_endpoint
from ..errors import ConfigError, nearest
from ..image.front import front_end_inputs


@dataclass
class StepPlan:
    index: int                                  # position in pipeline.flow
    step: FlowStep
    session: object                             # backends.base.Session
    feeds: list[tuple[str, str, object]] = field(default_factory=list)
    # (input, "pipeline" | "session" | "either", pipeline input name | (session, output)
    #  | [(session, output), ...] latest first: the first whose session ran in this pass)
    self_feeds: dict[str, str] = field(default_factory=dict)   # input -> own output, for repeat > 0
    state: list = field(default_factory=list)   # StateComponents binding this session
    outputs: list[str] = field(default_factory=list)  # fetched from the engine
    keep: list[str] = field(default_factory=list)     # of those, the ones wires read
    counter_dtype: str | None = None
    # step.merge, each entry: (the entry, (session, output) of the rows, the id whose positions take them)
    merges: list[tuple[object, tuple[str, str], int | None]] = field(default_factory=list)


@dataclass
class Plan:
    phases: dict[str, list[StepPlan]]
    pipeline_outputs: dict[str, tuple[str, str]]   # name -> (session, output)
    pipeline_inputs: set[str]
    caller_inputs: set[str] = field(default_factory=set)   # pipeline inputs the caller must give
    # loop outputs made by steps that run on some passes only: candidates, latest first
    output_options: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


_ALL_PASSES = frozenset(("prompt", "token_gen"))


def _passes(on: str) -> frozenset[str]:
    return _ALL_PASSES if on == "any" else frozenset((on,))


def _sources(produced: list, name: str) -> list[tuple[str, str]]:
    """Earlier producers of ``name``, latest first, down to the first that runs on every pass."""
    found = []
    for session, outs, on in reversed(produced):
        if name in outs:
            found.append((session, on))
            if on == "any":
                break
    return found


def _check_covered(found: list[tuple[str, str]], wanted: frozenset[str], what: str, file: str) -> None:
    """Some producer in ``found`` runs on every kind of pass in ``wanted``, or a ConfigError."""
    covered = frozenset().union(*(_passes(on) for _, on in found))
    missing = sorted(wanted - covered)
    if missing:
        makers = ", ".join(f'"{s}" (on {on})' for s, on in found)
        raise ConfigError(f'{what} comes from {makers}, but none of them runs on {missing[0]} passes, so '
                          f'it would be missing there: add a step that makes it on those passes, or '
                          f'run its reader with "on": "{next(iter(covered))}"', file=file,
                          path="$.pipeline.flow")


def _order(spec: PipelineSpec, sessions: dict) -> list[tuple[int, FlowStep]]:
    """Flow steps in execution order (init, step, final; flow order within a phase)."""
    steps = [(i, s) for i, s in enumerate(spec.pipeline.flow) if s.run in sessions]
    return sorted(steps, key=lambda item: (FLOW_PHASES.index(item[1].when), item[0]))


def _audio_inputs(spec) -> set[str]:
    """The pipeline inputs a transcription gives (pipeline/transcription.py)."""
    audio = spec.preprocessing.audio
    if audio is None:
        return set()
    return {audio.input} | ({audio.context.frames_input} if audio.context is not None else set())


def plan_flow(spec: PipelineSpec, sessions: dict, components: list, file: str,
              loop_inputs: tuple[str, ...], loop_outputs: tuple[str, ...]) -> Plan:
    ordered = _order(spec, sessions)
    position = {}                     # session -> first execution slot
    for slot, (_, step) in enumerate(ordered):
        position.setdefault(step.run, slot)

    wires_to: dict[tuple[str, str], tuple[str, str, int]] = {}
    self_wires: dict[tuple[str, str], str] = {}
    pipeline_outputs: dict[str, tuple[str, str]] = {}
    declared_inputs = (set(loop_inputs) | set(spec.pipeline.inputs) | set(front_end_inputs(spec))
                       | _audio_inputs(spec))
    for i, wire in enumerate(spec.pipeline.dataflow):
        src, dst = split_endpoint(wire.from_), split_endpoint(wire.to)
        path = f"$.pipeline.dataflow[{i}]"
        if src[0] not in sessions and src[0] in spec.pipeline.sessions:
            if dst[0] == "outputs":
                continue               # a missing optional session makes no pipeline output
            src = ("inputs", src[1])   # a missing optional session: the caller gives its output
        if src[0] != "inputs":
            _check_tensor(sessions, src, "outputs", file, path + ".from")
            if src[0] not in position:   # its output would never exist
                raise ConfigError(f'wire from "{wire.from_}": no flow step runs session "{src[0]}"; add '
                                  f'{{"run": "{src[0]}", "when": ...}} to pipeline.flow', file=file,
                                  path=path + ".from")
        if dst[0] != "outputs":
            _check_tensor(sessions, dst, "inputs", file, path + ".to")
        if src[0] == "inputs":
            hint = nearest(src[1], loop_inputs) if src[1] not in declared_inputs else None
            if hint:   # a near miss of what the loop gives is a typo, not a caller input
                raise ConfigError(f'pipeline input "{src[1]}" is never given: the {spec.generation.loop} '
                                  f'loop supplies {", ".join(loop_inputs)}. Did you mean "inputs.{hint}"?',
                                  file=file, path=path + ".from")
            declared_inputs.add(src[1])
        if dst[0] == "outputs":
            pipeline_outputs[dst[1]] = src
        elif src[0] == dst[0]:
            self_wires[dst] = src[1]
        else:
            if src[0] in sessions and dst[0] in sessions and position.get(src[0], 0) > position.get(dst[0], 0):
                raise ConfigError(f'wire from "{wire.from_}" to "{wire.to}": session "{src[0]}" runs after '
                                  f'"{dst[0]}" in the flow, so its output is not there yet. Move '
                                  f'"{src[0]}" earlier in pipeline.flow', file=file, path=path)
            wires_to[dst] = (src[0], src[1], i)

    claimed = {}
    for comp in components:
        for session, names in comp.inputs.items():
            for name in names:
                claimed[(session, name)] = comp

    phases: dict[str, list[StepPlan]] = {p: [] for p in FLOW_PHASES}
    produced: list[tuple[str, set[str], str]] = []    # (session, outputs, on) in execution order
    needed: dict[str, set[str]] = {name: set() for name in sessions}
    for slot, (index, step) in enumerate(ordered):
        session = sessions[step.run]
        plan = StepPlan(index, step, session)
        for comp in components:
            if step.run in comp.inputs and comp not in plan.state:
                plan.state.append(comp)
        for name, info in session.inputs.items():
            key = (step.run, name)
            if any(m.into == name for m, _ in step.merges(index)):
                continue   # the merge feeds it (engine/merge.py feed_features)
            if key in self_wires:
                plan.self_feeds[name] = self_wires[key]
                needed[step.run].add(self_wires[key])
            if key in wires_to:
                src_session, src_name, _ = wires_to[key]
                if src_session == "inputs":
                    plan.feeds.append((name, "pipeline", src_name))
                else:
                    plan.feeds.append((name, "session", (src_session, src_name)))
                    needed[src_session].add(src_name)
            elif key in claimed:
                continue
            elif name == step.counter:
                plan.counter_dtype = info.dtype
            else:
                found = _sources(produced, name)
                if len(found) == 1 and found[0][1] == "any":
                    plan.feeds.append((name, "session", (found[0][0], name)))
                    needed[found[0][0]].add(name)
                elif found:
                    _check_covered(found, _passes(step.on), f'input "{name}" of session "{step.run}"', file)
                    plan.feeds.append((name, "either", [(s, name) for s, _ in found]))
                    for s, _ in found:
                        needed[s].add(name)
                elif name in declared_inputs:
                    plan.feeds.append((name, "pipeline", name))
                elif key not in self_wires:
                    later = next((s.run for _, s in ordered[slot:]
                                  if s.run != step.run and name in sessions[s.run].outputs), None)
                    if later is not None:
                        raise ConfigError(
                            f'input "{name}" of session "{step.run}" is an output of session "{later}", '
                            f'but "{later}" runs after "{step.run}" in the flow, so it is not there yet. '
                            f'Move "{later}" earlier in pipeline.flow', file=file, path="$.pipeline.flow")
                    fed_back = name.replace("past", "present")
                    if fed_back != name and fed_back in session.outputs:   # a state pair, not an input
                        raise ConfigError(
                            f'input "{name}" of session "{step.run}" is fed by nothing; with its output '
                            f'"{fed_back}" it is a state carried step to step: declare it, e.g. '
                            f'{{"input": "{name}", "output": "{fed_back}"}} in pipeline.state.recurrent',
                            file=file, path="$.pipeline.state.recurrent")
                    raise ConfigError(
                        f'input "{name}" of session "{step.run}" is fed by nothing: no wire, no state, no '
                        f"earlier session output of that name, and not a pipeline input "
                        f"({', '.join(sorted(declared_inputs)) or 'none'}). Wire it, e.g. "
                        f'{{"from": "inputs.{loop_inputs[0] if loop_inputs else name}", '
                        f'"to": "{step.run}.{name}"}}',
                        file=file, path="$.pipeline.dataflow")
        produced.append((step.run, set(session.outputs), step.on))
        phases[step.when].append(plan)

    output_options: dict[str, list[tuple[str, str]]] = {}
    for name in loop_outputs:
        if name in pipeline_outputs:
            continue
        found = _sources([(p.step.run, p.session.outputs, p.step.on)
                          for p in phases["step"] or phases["init"]], name)
        source = found[0][0] if found else None
        if len(found) > 1 or (found and found[0][1] != "any"):
            _check_covered(found, _ALL_PASSES, f'the loop\'s "{name}"', file)
            output_options[name] = [(s, name) for s, _ in found]
            for s, _ in found[1:]:
                needed[s].add(name)
        if source is None:
            last = (phases["step"] or phases["init"] or [None])[-1]
            example = f"{last.step.run}.{next(iter(last.session.outputs))}" if last else "decoder.scores"
            have = f' (session "{last.step.run}" has: {", ".join(last.session.outputs)})' if last else ""
            raise ConfigError(f'no session has an output named "{name}" for the loop to read{have}; wire '
                              f'one, e.g. {{"from": "{example}", "to": "outputs.{name}"}}',
                              file=file, path="$.pipeline.dataflow")
        pipeline_outputs[name] = (source, name)
    for plan in phases["final"]:   # what the final phase makes is the pipeline's result
        for name in plan.session.outputs:
            pipeline_outputs.setdefault(name, (plan.step.run, name))
    for session, name in pipeline_outputs.values():
        needed[session].add(name)

    by_state: dict[str, set[str]] = {}
    for comp in components:
        for session, names in comp.outputs.items():
            by_state.setdefault(session, set()).update(names)
    for plans in phases.values():
        for plan in plans:
            wired = needed[plan.step.run]
            fetch = wired | by_state.get(plan.step.run, set())
            plan.outputs = [o for o in plan.session.outputs if o in fetch] or [next(iter(plan.session.outputs))]
            plan.keep = [o for o in plan.outputs if o in wired]
    used = {key for plans in phases.values() for p in plans for _, kind, key in p.feeds if kind == "pipeline"}
    for plans in phases.values():   # per-item sizes read from a pipeline input, not a session input
        for p in plans:
            shape = p.step.dynamic_shape
            if shape and shape.source not in p.session.inputs:
                declared_inputs.add(shape.source)
                used.add(shape.source)
    return Plan(phases, pipeline_outputs, declared_inputs, used - set(loop_inputs), output_options)


def _check_tensor(sessions: dict, endpoint: tuple[str, str], side: str, file: str, path: str) -> None:
    name, tensor = endpoint
    if name not in sessions:
        return  # an optional session that isn't there; config validation covered the rest
    have = getattr(sessions[name], side)
    if tensor not in have:
        what = "output" if side == "outputs" else "input"
        raise ConfigError(f'Dataflow wire references {what} "{tensor}" but session "{name}" has no such '
                          f"{what} (available {side}: {', '.join(have)})", file=file, path=path)
