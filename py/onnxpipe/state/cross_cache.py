"""Cross-attention keys/values: an init-phase session's outputs, computed once per input and
bound to the step sessions' inputs of the same names on every step, by handle (no copy).
Declared by ``state.cross_cache`` or, without it, by flow steps' ``cross_attention_from``.

The source (e.g. an encoder that also projects its states through every decoder layer's
cross-attention keys and values) runs in the init phase; its outputs named like step-session
inputs are the cache. They are disposed on ``reset`` (a new input) and survive ``rewind``
(they do not depend on the decoded length).
"""

from __future__ import annotations

from ..config.schema import PipelineSpec
from ..errors import ConfigError, choices_text
from .base import StateComponent

PATH = "$.pipeline.state.cross_cache"


def declared_source(spec: PipelineSpec, file: str) -> tuple[str, str] | None:
    """(source session, JSON path that named it) of the cross cache, or None when there is none.

    ``state.cross_cache`` declares it; without it, flow steps' ``cross_attention_from`` alone
    does (a frozen cache of that session's outputs). Every such step must name the same source.
    """
    pipe = spec.pipeline
    cross = pipe.state.cross_cache
    if cross is not None:
        if not cross.frozen:
            raise ConfigError("cross_cache.frozen false is not supported: a source recomputed every step "
                              'is an ordinary step-phase session; put it in the flow with "when": "step" '
                              "and drop cross_cache", file=file, path=f"{PATH}.frozen")
        source, where = cross.source, f"{PATH}.source"
    else:
        named = [(i, s.cross_attention_from) for i, s in enumerate(pipe.flow) if s.cross_attention_from]
        if not named:
            return None
        source, where = named[0][1], f"$.pipeline.flow[{named[0][0]}].cross_attention_from"
    if source not in pipe.sessions:
        raise ConfigError(f'cross attention source "{source}" is not a declared session. Declared: '
                          f"{choices_text(pipe.sessions)}", file=file, path=where)
    for i, step in enumerate(pipe.flow):
        if step.cross_attention_from is not None and step.cross_attention_from != source:
            what = "cross_cache.source is" if cross is not None else "an earlier step names"
            raise ConfigError(f'flow step "{step.run}" takes cross attention from '
                              f'"{step.cross_attention_from}", but {what} "{source}"',
                              file=file, path=f"$.pipeline.flow[{i}].cross_attention_from")
    phases = {step.when for step in pipe.flow if step.run == source}
    if phases != {"init"}:
        found = ", ".join(sorted(phases)) or "not in the flow"
        raise ConfigError(f'cross attention source "{source}" must run in the init phase only (once per '
                          f'input), found: {found}', file=file, path=where)
    return source, where


def cross_names(spec: PipelineSpec, sessions: dict, source: str, where: str,
                file: str) -> dict[str, set[str]]:
    """Step session -> the outputs of ``source`` it takes, checked at load."""
    pipe = spec.pipeline
    if source not in sessions:   # an optional source that is missing: nothing to cache
        return {}
    outputs = set(sessions[source].outputs)
    steps = [s.run for s in pipe.flow if s.when == "step" and s.run in sessions]
    marked = [s.run for s in pipe.flow if s.cross_attention_from == source and s.run in sessions]
    targets: dict[str, set[str]] = {}
    for name in dict.fromkeys(marked or steps):
        taken = outputs & set(sessions[name].inputs)
        if taken:
            targets[name] = taken
        elif marked:
            raise ConfigError(f'flow step "{name}" takes cross attention from "{source}", but none of '
                              f"its inputs ({', '.join(sessions[name].inputs)}) is an output of "
                              f"\"{source}\" ({', '.join(sessions[source].outputs)})", file=file,
                              path="$.pipeline.flow")
    if not targets:
        raise ConfigError(f'cross attention source "{source}": none of its outputs '
                          f"({', '.join(sessions[source].outputs)}) is an input of a step-phase session "
                          f"({', '.join(steps) or 'there are none'}); the cache would feed nothing",
                          file=file, path=where)
    return targets


class CrossCache(StateComponent):
    def __init__(self, backend, source: str, targets: dict[str, set[str]]):
        self.backend = backend
        self.source = source
        self.names = sorted(set().union(*targets.values()))
        # the source is listed with no inputs so that its flow step calls ``update``
        self.inputs = {source: set(), **targets}
        self.outputs = {source: set(self.names)}
        self.values: dict[str, object] = {}

    def bind(self, session, feeds, bound, ctx):
        if session == self.source:
            return
        for name in self.inputs[session]:
            value = self.values.get(name)
            if value is None:
                raise RuntimeError(f'cross cache "{name}" is empty: the init phase did not run '
                                   f'"{self.source}" before "{session}"')
            feeds[name] = value

    def update(self, session, outputs, ctx):
        if session != self.source:
            return
        old = [v for k, v in self.values.items() if outputs.get(k) is not v]
        self.values = {name: outputs[name] for name in self.names}
        self.backend.dispose_many(old)

    def rewind(self, length: int) -> bool:
        return True   # independent of the decoded length

    def reset(self):
        self.backend.dispose_many(list(self.values.values()))
        self.values = {}
