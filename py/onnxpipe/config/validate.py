"""Load-time checks of a parsed PipelineSpec that need no session I/O.

This module holds the structural checks (sessions, flow, wires, output, token ids, files);
each stage checks its own keys with a check it registers (``registry.register_check``), run
here between them. Checks that need the sessions' real input/output names (a wire to a tensor
a session doesn't have, inputs nothing feeds) run in ``engine/wiring.py`` when the sessions open.
"""

from __future__ import annotations

import os

from ..errors import ConfigError, choices_text, nearest
from .registry import run_stage_checks
from .schema import FLOW_PHASES, PipelineSpec

MAX_FLOW_STEPS = 10
PIPELINE_IO = ("inputs", "outputs")
_MINIMAL = '"sessions": {"decoder": {"file": "model.onnx"}}'


def split_endpoint(text: str) -> tuple[str, str] | None:
    """"session.tensor" -> (session, tensor); tensor names may contain dots."""
    head, dot, tail = text.partition(".")
    return (head, tail) if dot and head and tail else None


def validate_spec(spec: PipelineSpec, file: str, bundle_dir: str | None = None) -> None:
    """Raise ConfigError for the first problem found (cross-references, files, cycles)."""
    pipe = spec.pipeline
    if spec.version != 2:
        raise ConfigError(f"expected version 2, found {spec.version}", file=file, path="$.version")
    if not pipe.sessions:
        raise ConfigError(f"Pipeline config requires at least one session. Add {_MINIMAL}",
                          file=file, path="$.pipeline.sessions")
    sessions = set(pipe.sessions)
    if len(pipe.flow) > MAX_FLOW_STEPS:
        raise ConfigError(f"at most {MAX_FLOW_STEPS} flow steps are allowed, found {len(pipe.flow)}",
                          file=file, path="$.pipeline.flow")
    if not pipe.flow:
        raise ConfigError('expected at least one flow step, e.g. "flow": [{"run": "decoder", '
                          '"when": "step"}] (or "extends": "autoregressive-decoder")',
                          file=file, path="$.pipeline.flow")
    for i, step in enumerate(pipe.flow):
        if step.run not in sessions:
            hint = nearest(step.run, sessions)
            tip = f' Did you mean "{hint}"?' if hint else ""
            raise ConfigError(
                f'Flow step references session "{step.run}" but no such session is declared in '
                f"pipeline.sessions.{tip} Declared sessions: {choices_text(sessions)}",
                file=file, path=f"$.pipeline.flow[{i}].run")
        if step.repeat < 1:
            raise ConfigError(f"expected repeat >= 1, found {step.repeat}", file=file,
                              path=f"$.pipeline.flow[{i}].repeat")
        if step.on != "any" and step.when != "step":
            raise ConfigError(f'"on": "{step.on}" chooses among step-phase passes; this step runs in '
                              f'the {step.when} phase (use "when": "step", or drop "on")',
                              file=file, path=f"$.pipeline.flow[{i}].on")
        if step.on != "any" and spec.generation.loop != "autoregressive":
            raise ConfigError(f'"on": "{step.on}" needs the autoregressive loop (its passes feed a '
                              f'prompt or one token); generation.loop is "{spec.generation.loop}"',
                              file=file, path=f"$.pipeline.flow[{i}].on")
        if step.loop == "per_image" and not step.loop_over:
            raise ConfigError('loop "per_image" needs "loop_over" (the input to iterate over)',
                              file=file, path=f"$.pipeline.flow[{i}].loop_over")
    _check_wires(spec, file, sessions)
    _check_output(spec, file, sessions)
    run_stage_checks(spec, file, bundle_dir)
    _check_token_extras(spec, file)
    if bundle_dir is not None:
        _check_files(spec, file, bundle_dir)


def _check_token_extras(spec: PipelineSpec, file: str) -> None:
    """Model-specific ids (tokens.image_token, ...) are ids, and something reads each: a flow
    step merging at it, the image/position code (image_token), or a plugin (which may read any)."""
    used = {m.token for i, s in enumerate(spec.pipeline.flow) for m, _ in s.merges(i)}
    if spec.preprocessing.image is not None or spec.pipeline.state.position_ids.strategy in ("mrope_3d", "auto"):
        used.add("image_token")
    if spec.preprocessing.image is not None:   # Mistral 3's row markers (image/pixtral.py)
        used.update(("image_break", "image_end", "image_inst"))
    for name, value in spec.tokens.extra.items():
        path = f"$.tokens.{name}"
        ids = value if isinstance(value, list) else [value]
        # image_token -1: a placeholder an embedding session replaces itself (Phi-3-vision's)
        low = -1 if name == "image_token" and not isinstance(value, list) else 0
        if not ids or not all(isinstance(i, int) and not isinstance(i, bool) and i >= low for i in ids):
            raise ConfigError(f"expected a token id (an integer >= 0{', or -1' if low else ''}) or a "
                              f"list of them, found {value!r}", file=file, path=path)
        if spec.pipeline.plugin is None and name not in used:
            raise ConfigError(f'"{name}" is read by no part of this pipeline: model-specific ids are read '
                              "by a flow step's merge.token, by the image and position code "
                              '("image_token", with preprocessing.image or mrope_3d positions) or by a '
                              "plugin", file=file, path=path)


def _check_wires(spec: PipelineSpec, file: str, sessions: set[str]) -> None:
    edges: dict[str, set[str]] = {}
    for i, wire in enumerate(spec.pipeline.dataflow):
        for side, text, io in (("from", wire.from_, "inputs"), ("to", wire.to, "outputs")):
            path = f"$.pipeline.dataflow[{i}].{side}"
            parts = split_endpoint(text)
            if parts is None:
                raise ConfigError(f'expected "session.tensor", found "{text}"', file=file, path=path)
            owner = parts[0]
            if owner == io:
                continue
            if owner not in sessions:
                valid = sorted(sessions) + [io]
                hint = nearest(owner, valid)
                tip = f' Did you mean "{hint}"?' if hint else ""
                raise ConfigError(f'wire names session "{owner}", which is not declared.{tip} '
                                  f"Valid: {', '.join(valid)}", file=file, path=path)
        src, dst = split_endpoint(wire.from_)[0], split_endpoint(wire.to)[0]
        if src == "inputs" and dst == "outputs":
            raise ConfigError(f'a wire from "{wire.from_}" straight to "{wire.to}" passes through no session: '
                              "pipeline outputs come from a session's outputs",
                              file=file, path=f"$.pipeline.dataflow[{i}]")
        if src in sessions and dst in sessions and src != dst:
            edges.setdefault(src, set()).add(dst)
    cycle = find_cycle(edges)
    if cycle:
        raise ConfigError("Circular dependency detected in dataflow: " + " → ".join(cycle),
                          file=file, path="$.pipeline.dataflow")


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle in a directed graph as [a, b, ..., a], or None (self-loops are not cycles)."""
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if color.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in color:
                found = visit(nxt)
                if found:
                    return found
        color[node] = 2
        stack.pop()
        return None

    for start in sorted(edges):
        if start not in color:
            found = visit(start)
            if found:
                return found
    return None


def _check_output(spec: PipelineSpec, file: str, sessions: set[str]) -> None:
    out = spec.pipeline.output
    if out is not None and out.session not in sessions:
        raise ConfigError(f'output names session "{out.session}", which is not declared. '
                          f"Declared sessions: {choices_text(sessions)}",
                          file=file, path="$.pipeline.output.session")
    if spec.generation.loop == "single_pass" and out is None:
        last = [s.run for s in spec.pipeline.flow][-1]
        raise ConfigError(f'a single_pass pipeline needs "output", e.g. "output": {{"session": '
                          f'"{last}", "name": "waveform"}}', file=file, path="$.pipeline.output")


def may_be_missing(spec: PipelineSpec, name: str) -> bool:
    """A session whose file may be absent: declared ``optional``, or run only by flow steps that
    are (then those steps are skipped, and wires from it become caller inputs)."""
    steps = [s for s in spec.pipeline.flow if s.run == name]
    return spec.pipeline.sessions[name].optional or (bool(steps) and all(s.optional for s in steps))


def _check_files(spec: PipelineSpec, file: str, bundle_dir: str) -> None:
    for name, session in spec.pipeline.sessions.items():
        variants = session.file.items() if isinstance(session.file, dict) else [(None, session.file)]
        for key, rel in variants:
            path = f"$.pipeline.sessions.{name}.file" + (f".{key}" if key else "")
            if not isinstance(rel, str):
                raise ConfigError(f"expected a file name, found {rel!r}", file=file, path=path)
            if os.path.isabs(rel) or ".." in rel.replace("\\", "/").split("/"):
                raise ConfigError(f'expected a path inside the bundle, found "{rel}"', file=file,
                                  path=path)
            if not may_be_missing(spec, name) and not os.path.isfile(os.path.join(bundle_dir, rel)):
                raise ConfigError(f'file "{rel}" does not exist in {bundle_dir}', file=file, path=path)
    plugin = spec.pipeline.plugin
    if plugin is not None:
        rel = plugin.module
        if os.path.isabs(rel) or ".." in rel.replace("\\", "/").split("/") or "://" in rel:
            raise ConfigError(f'expected a relative path inside the bundle, found "{rel}"',
                              file=file, path="$.pipeline.plugin.module")
        if not os.path.isfile(os.path.join(bundle_dir, rel)):
            raise ConfigError(f'plugin file "{rel}" does not exist in {bundle_dir}', file=file,
                              path="$.pipeline.plugin.module")


__all__ = ["validate_spec", "find_cycle", "split_endpoint", "FLOW_PHASES", "PIPELINE_IO"]
