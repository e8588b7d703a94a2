"""Position ids and attention mask: derived from the step's lengths, nothing stored."""

from __future__ import annotations

from ..backends.base import TensorInfo
from ..errors import ConfigError
from .base import StateComponent, StepContext


class PositionIds(StateComponent):
    """``range(past, past + new)`` as [batch, new], or [3, batch, new] for mRoPE (text only)."""

    def __init__(self, backend, infos: dict[str, TensorInfo], strategy: str, file: str):
        self.backend = backend
        self.infos = infos            # session -> info of its position input
        self.inputs = {s: {i.name} for s, i in infos.items()}
        self.outputs = {}
        self.rank = {}
        for session, info in infos.items():
            rank = len(info.shape)
            if strategy == "auto":
                rank_kind = {2: "default", 3: "mrope_3d"}.get(rank)
                if rank_kind is None:
                    raise ConfigError(f'position input "{info.name}" of session "{session}" has rank '
                                      f"{rank}; auto expects rank 2 (default) or 3 (mrope_3d)",
                                      file=file, path="$.pipeline.state.position_ids.strategy")
            self.rank[session] = rank

    def bind(self, session, feeds, bound, ctx: StepContext):
        info = self.infos[session]
        row = list(range(ctx.past_length, ctx.total_length))
        if self.rank[session] == 3:
            feeds[info.name] = self.backend.tensor(row * 3 * ctx.batch, info.dtype, (3, ctx.batch, ctx.new_length))
        else:
            feeds[info.name] = self.backend.tensor(row * ctx.batch, info.dtype, (ctx.batch, ctx.new_length))


class AttentionMask(StateComponent):
    """All-ones mask over every position so far: [batch, past + new]."""

    def __init__(self, backend, infos: dict[str, TensorInfo]):
        self.backend = backend
        self.infos = infos
        self.inputs = {s: {i.name} for s, i in infos.items()}
        self.outputs = {}

    def bind(self, session, feeds, bound, ctx: StepContext):
        info = self.infos[session]
        feeds[info.name] = self.backend.full(info.dtype, (ctx.batch, ctx.total_length), 1)
