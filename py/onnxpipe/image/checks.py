"""Load-time checks of the vision-language keys that need no session I/O: position_ids
(strategy, grid_source, spatial_merge_size) and the flow steps' ``merge``."""

from __future__ import annotations

from ..config.registry import register_check
from ..config.schema import PipelineSpec
from ..errors import ConfigError


def check_config(spec: PipelineSpec, file: str, bundle_dir: str | None = None) -> None:
    positions = spec.pipeline.state.position_ids
    where = "$.pipeline.state.position_ids"
    if positions.strategy == "windowed":
        # the seed names it ("sliding window position tracking") without saying what differs from
        # plain positions; a sliding-window model takes plain positions and bounds its cache
        raise ConfigError('strategy "windowed" is not supported: a sliding-window model takes plain '
                          'positions (strategy "default" or "auto") and bounds its cache with '
                          "pipeline.state.kv_cache.sliding_window", file=file, path=f"{where}.strategy")
    if positions.spatial_merge_size is not None and positions.spatial_merge_size <= 0:
        raise ConfigError(f"expected a positive integer, found {positions.spatial_merge_size}",
                          file=file, path=f"{where}.spatial_merge_size")
    if positions.grid_source is not None:
        _endpoint(spec, positions.grid_source, file, f"{where}.grid_source")
    order = [s.run for s in spec.pipeline.flow]
    for i, step in enumerate(spec.pipeline.flow):
        if step.merge == ():
            raise ConfigError("expected a merge object or a list of at least one, found an empty list",
                              file=file, path=f"$.pipeline.flow[{i}].merge")
        seen: dict[str, str] = {}
        for merge, path in step.merges(i):
            source = _endpoint(spec, merge.from_, file, f"{path}.from")
            if source not in order[:i]:
                raise ConfigError(f'session "{source}" must run before "{step.run}" in the flow to merge its '
                                  f'output into "{step.run}"', file=file, path=f"{path}.from")
            token = spec.tokens.extra.get(merge.token)   # absent: the bundle takes no images
            if token is not None and (isinstance(token, bool) or not isinstance(token, int)):
                raise ConfigError(f'merging at tokens.extra.{merge.token}: expected that id (an integer) in '
                                  f'tokens.extra, found {token!r}', file=file, path=f"{path}.token")
            if merge.token in seen:   # one token's positions take one source's rows
                raise ConfigError(f'tokens.extra.{merge.token} is merged at already by {seen[merge.token]}: '
                                  "each merge of a step needs its own token", file=file, path=f"{path}.token")
            seen[merge.token] = path


register_check("vision", check_config, order=80)


def _endpoint(spec: PipelineSpec, text: str, file: str, path: str) -> str:
    session, dot, output = text.partition(".")
    if not (dot and session and output):
        raise ConfigError(f'expected "session.output", found "{text}"', file=file, path=path)
    if session not in spec.pipeline.sessions:
        raise ConfigError(f'session "{session}" is not declared in pipeline.sessions', file=file, path=path)
    return session
