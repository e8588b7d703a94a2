"""Structural detection and assembly: config + backend -> sessions, state, plan, executor.

Nothing here looks at model_type: the shape of the config (plugin, cross attention, number
of sessions) and the sessions' own I/O decide everything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config.load import LoadedConfig
from ..config.schema import PipelineSpec
from ..config.validate import may_be_missing
from ..errors import ConfigError, InputError
from ..image import front as vision
from ..loops import loop_for
from ..search import beam, speculative
from ..state.cache_branch import CacheBranch
from ..state.cross_cache import CrossCache, cross_names, declared_source
from ..state import cross_kv
from ..state.kv_cache import KVCache, make_kv_cache
from ..state.positions import AttentionMask, PositionIds
from ..state.recurrent import Recurrent, owner as recurrent_owner
from .executor import Executor
from .plugin import load_plugin, plugin_reads
from .wiring import plan_flow

def structure(spec: PipelineSpec) -> str:
    """A name for the pipeline's shape, from structure alone (for inspect and logs)."""
    pipe = spec.pipeline
    if pipe.plugin is not None:
        return "plugin"
    if any(step.cross_attention_from for step in pipe.flow) or pipe.state.cross_cache:
        return "encoder-decoder"
    if len(pipe.sessions) > 1:
        return "multi-session"
    return "single-session"


@dataclass
class Assembly:
    sessions: dict
    components: list
    executor: Executor
    warnings: list[str]


def choose_provider(wanted: tuple[str, ...], available: tuple[str, ...]) -> tuple[str, str | None]:
    """(provider to use, warning or None): the first wanted one the engine has."""
    for name in wanted:
        if name in available:
            return name, None
    fallback = available[-1] if "cpu" not in available else "cpu"
    if wanted:
        return fallback, f"none of {', '.join(wanted)} is available here; using {fallback}"
    return fallback, None


def session_files(config: LoadedConfig, backend, providers=None, variant=None) -> list[str]:
    """Bundle-relative files the sessions will open here (model files and their data)."""
    out = []
    for s in config.spec.pipeline.sessions.values():
        provider, _ = choose_provider(tuple(providers) if providers else s.execution_provider, backend.providers)
        out.append(s.file_for(variant or provider))
        out.extend(s.data_for(variant or provider))
    return out


# provider names a forced variant may give even where a bundle made no file for them (each
# session then opens its "default" file); any other name must be a key of a session's file map
PROVIDER_VARIANTS = frozenset({"cpu", "wasm", "webgpu"})


def check_variant(config: LoadedConfig, variant: str | None, available: tuple[str, ...]) -> None:
    """Refuse a variant name that is neither a provider nor one the bundle's file maps name."""
    if variant is None or variant in PROVIDER_VARIANTS or variant in available:
        return
    named = sorted({key for s in config.spec.pipeline.sessions.values() if isinstance(s.file, dict)
                    for key in s.file})
    if variant not in named:
        raise InputError(f'variant "{variant}": {config.file} names no such file variant; it names '
                         f'{", ".join(named) if named else "one file per session"}')


def open_sessions(config: LoadedConfig, backend, providers=None, variant=None) -> tuple[dict, list[str]]:
    """Open every session on its provider; ``variant`` forces the files made for that provider
    (or that name: a bundle may name other variants, e.g. "int4")."""
    check_variant(config, variant, backend.providers)
    sessions, warnings = {}, []
    for name, s in config.spec.pipeline.sessions.items():
        wanted = tuple(providers) if providers else s.execution_provider
        provider, warning = choose_provider(wanted, backend.providers)
        if warning:
            warnings.append(f'session "{name}": {warning}')
        rel = s.file_for(variant or provider)
        if not isinstance(rel, str):   # a map of variants with none for this provider, nor a default
            raise ConfigError(f'no file for provider "{variant or provider}": expected a "{variant or provider}" '
                              f'or "default" entry, found {sorted(s.file) if isinstance(s.file, dict) else s.file!r}',
                              file=config.file, path=f"$.pipeline.sessions.{name}.file")
        path = os.path.join(config.bundle_dir, rel)
        data = s.data_for(variant or provider)
        if may_be_missing(config.spec, name) and not os.path.isfile(path):
            continue
        try:
            sessions[name] = backend.open_session(name, path, [provider], dict(s.session_options),
                                                  external_data=data)
        except ConfigError as exc:   # the engine knows its options; the config knows the file
            raise ConfigError(exc.detail, file=config.file, path=f"$.pipeline.{exc.path}") from None
    return sessions, warnings


def make_components(spec: PipelineSpec, sessions: dict, backend, file: str) -> list:
    state = spec.pipeline.state
    step_sessions = [sessions[s.run] for s in spec.pipeline.flow if s.when == "step" and s.run in sessions]
    components: list = []
    positions, masks, branches = {}, {}, {}
    cross: dict[str, set[str]] = {}
    declared = declared_source(spec, file)
    if declared is not None:
        source, where = declared
        cross = cross_names(spec, sessions, source, where, file)
        if cross:
            components.append(CrossCache(backend, source, cross))
    for session in dict.fromkeys(step_sessions):
        taken = frozenset(cross.get(session.name, ()))
        if state.cross_kv is not None:
            pairs = cross_kv.find(session, state.cross_kv, file)
            if pairs:
                components.append(cross_kv.CrossKV(backend, session, pairs, state.kv_cache.num_heads,
                                                   state.kv_cache.head_size, file))
                taken |= frozenset(pairs)
        kv = make_kv_cache(backend, session, state.kv_cache, spec.generation.max_length, file,
                           session.provider, taken)
        if kv is not None and not _share_kv(components, kv, session, file):
            components.append(kv)
        if state.position_ids.input_name in session.inputs:
            positions[session.name] = session.inputs[state.position_ids.input_name]
        if state.attention_mask.input_name in session.inputs:
            masks[session.name] = session.inputs[state.attention_mask.input_name]
        if state.use_cache_branch.input_name in session.inputs:
            branches[session.name] = session.inputs[state.use_cache_branch.input_name]
    if state.kv_cache.format != "auto" and not any(isinstance(c, KVCache) for c in components):
        names = ", ".join(f'{s.name}: {", ".join(s.inputs)}' for s in dict.fromkeys(step_sessions))
        raise ConfigError(f'kv_cache format "{state.kv_cache.format}" but no step-phase session has an '
                          f"input matching its past patterns (inputs: {names})", file=file,
                          path="$.pipeline.state.kv_cache")
    if state.cross_kv is not None and not any(isinstance(c, cross_kv.CrossKV) for c in components):
        raise ConfigError(f'no step-phase session has an input matching "{state.cross_kv.past_pattern}"',
                          file=file, path="$.pipeline.state.cross_kv.past_pattern")
    if positions:
        components.append(PositionIds(backend, positions, state.position_ids, file))
    if masks:
        components.append(AttentionMask(backend, masks))
    if branches:
        components.append(CacheBranch(backend, branches))
    for i, rec in enumerate(state.recurrent):
        where = f"$.pipeline.state.recurrent[{i}]"
        components.append(Recurrent(backend, recurrent_owner(sessions.values(), rec, file, where),
                                    rec, file, where))
    return components


def _share_kv(components: list, kv: KVCache, session, file: str) -> bool:
    """Sessions with the very same past/present names share one cache (a prompt-only and a
    token-only variant of the same layers: onnxruntime-genai's decoder-pipeline stages). True
    when ``kv``'s session joined an earlier cache; a partial overlap is an error."""
    names = kv.inputs[session.name]
    for comp in components:
        if not isinstance(comp, KVCache):
            continue
        owner, theirs = next(iter(comp.inputs.items()))
        if not names & theirs:
            continue
        if names != theirs or kv.outputs[session.name] != comp.outputs[owner] or type(kv) is not type(comp) \
                or kv._fixed != comp._fixed:
            raise ConfigError(f'sessions "{owner}" and "{session.name}" share KV inputs '
                              f'({", ".join(sorted(names & theirs)[:3])}) but not the same cache: a cache two '
                              f"sessions take must have the same layers, names, layout and shapes in both",
                              file=file, path="$.pipeline.state.kv_cache")
        comp.inputs[session.name] = names
        comp.outputs[session.name] = kv.outputs[session.name]
        return True
    return False


def assemble(config: LoadedConfig, backend, providers=None, variant=None) -> Assembly:
    spec = config.spec
    sessions, warnings = open_sessions(config, backend, providers, variant)
    components = make_components(spec, sessions, backend, config.file)
    loop = loop_for(spec.generation.loop, config.file)   # what it supplies and reads
    if spec.pipeline.output is not None:
        out = spec.pipeline.output
        if out.session in sessions and out.name not in sessions[out.session].outputs:
            raise ConfigError(f'session "{out.session}" has no output "{out.name}" (available outputs: '
                              f"{', '.join(sessions[out.session].outputs)})", file=config.file,
                              path="$.pipeline.output.name")
    supplies, reads = loop.io(spec)
    plan = plan_flow(spec, sessions, components, config.file, supplies, reads)
    if spec.pipeline.output is not None:
        plan.pipeline_outputs.setdefault("output", (spec.pipeline.output.session, spec.pipeline.output.name))
        _keep(plan, spec.pipeline.output.session, spec.pipeline.output.name)
    loop.check_plan(spec, plan, config.file)
    executor = Executor(backend, plan, components)
    vision.attach(config, plan, sessions, components, executor)
    speculative.check_state(spec, executor, config.file)
    plugin = load_plugin(config, backend, sessions, executor.values)
    executor.use_plugin(plugin)
    beam.check_state(spec, executor, config.file)
    for session, name in plugin_reads(plugin):
        if session in sessions:
            _keep(plan, session, name)
        else:   # a missing optional session: the caller gives its output, as for its wires
            plan.pipeline_inputs.add(name)
            plan.caller_inputs.add(name)
    return Assembly(sessions, components, executor, warnings)


def _keep(plan, session: str, name: str) -> None:
    """Fetch and keep a session output as if a wire read it (the result, a plugin's reads)."""
    for plans in plan.phases.values():
        for p in plans:
            if p.step.run == session:
                if name not in p.outputs:
                    p.outputs.append(name)
                if name not in p.keep:
                    p.keep.append(name)
