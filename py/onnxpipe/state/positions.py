"""Position ids and attention mask, derived from the step's lengths (and, for mRoPE, the image
grids); the only thing stored is mRoPE's offset between text positions and cache positions."""

from __future__ import annotations

from ..backends.base import TensorInfo
from ..errors import ConfigError, InputError
from .base import StateComponent, StepContext
from .mrope import layout


class PositionIds(StateComponent):
    """``range(past, past + new)`` as [batch, new]; for mRoPE [3, batch, new] from
    ``state/mrope.py``: text positions on all three axes, image tokens at (t, row, column) of
    their grid, and the text after an image continuing from the largest position so far. Later
    steps add that shift (transformers' ``rope_deltas``) to their cache positions."""

    def __init__(self, backend, infos: dict[str, TensorInfo], spec, file: str, image_token: int | None = None,
                 merge: int | None = None, grid_input: str | None = None):
        """``spec``: PositionIdsSpec; ``image_token``, ``merge`` (grid cells per token side) and
        ``grid_input`` (the pipeline input holding each image's grid) serve mrope_3d."""
        self.backend = backend
        self.infos = infos            # session -> info of its position input
        self.inputs = {s: {i.name} for s, i in infos.items()}
        self.outputs = {}
        self.rank = {}
        self.image_token = image_token
        self.merge = merge
        self.grid_input = grid_input
        self.grid_source = tuple(spec.grid_source.split(".", 1)) if spec.grid_source else None
        self.values: dict = {}        # the executor's session outputs (grid_source), set by assembly
        self.shifts: list[tuple[int, int, int]] = []   # (start, end, shift) per chunk with images
        where = "$.pipeline.state.position_ids.strategy"
        for session, info in infos.items():
            rank = len(info.shape)
            want = {"default": 2, "mrope_3d": 3}.get(spec.strategy)
            if spec.strategy == "auto":
                if rank not in (2, 3):
                    raise ConfigError(f'position input "{info.name}" of session "{session}" has rank '
                                      f"{rank}; auto expects rank 2 (default) or 3 (mrope_3d)",
                                      file=file, path=where)
            elif rank != want:
                raise ConfigError(f'strategy "{spec.strategy}" makes rank-{want} position ids, but input '
                                  f'"{info.name}" of session "{session}" has rank {rank}', file=file, path=where)
            self.rank[session] = rank

    @property
    def shift(self) -> int:
        """Text position minus cache position for what comes next."""
        return self.shifts[-1][2] if self.shifts else 0

    def bind(self, session, feeds, bound, ctx: StepContext):
        info = self.infos[session]
        if self.rank[session] != 3:
            row = list(range(ctx.past_length, ctx.total_length))
            feeds[info.name] = self.backend.tensor(row * ctx.batch, info.dtype, (ctx.batch, ctx.new_length))
            return
        axes = self._mrope(ctx)
        flat = [p for axis in axes for p in axis * ctx.batch]
        feeds[info.name] = self.backend.tensor(flat, info.dtype, (3, ctx.batch, ctx.new_length))

    def _mrope(self, ctx: StepContext) -> list[list[int]]:
        start = ctx.past_length + self.shift
        ids = self._new_ids(ctx)
        if ids is None or self.image_token is None or self.image_token not in ids:
            row = list(range(start, start + ctx.new_length))
            return [row, row, row]
        grids = self._grids(ctx)
        axes, next_position = layout(ids, self.image_token, grids, self.merge, start)
        # a step that runs several sessions binds each: the chunk is recorded once
        if not self.shifts or self.shifts[-1][0] != ctx.past_length:
            self.shifts.append((ctx.past_length, ctx.total_length, next_position - ctx.total_length))
        return axes

    @staticmethod
    def _new_ids(ctx: StepContext) -> list[int] | None:
        given = (ctx.inputs or {}).get("input_ids")
        if not isinstance(given, tuple) or len(given[0]) != ctx.new_length * ctx.batch:
            return None
        return list(given[0][:ctx.new_length])

    def _grids(self, ctx: StepContext) -> list[tuple[int, int, int]]:
        if self.grid_source is not None:
            tensor = self.values.get(self.grid_source)
            if tensor is None:
                raise InputError(f'the prompt has image tokens but "{".".join(self.grid_source)}" (the '
                                 f"grids of position_ids.grid_source) was not made: no images given?")
            flat = [int(v) for v in self.backend.to_list(tensor)]
        else:
            items = (ctx.inputs or {}).get(self.grid_input) or []
            flat = [int(v) for values, _ in items for v in values]
        if not flat or len(flat) % 3:
            raise InputError(f"the prompt has image tokens (id {self.image_token}) but no image grids "
                             f"were given: pass the images")
        return [tuple(flat[i:i + 3]) for i in range(0, len(flat), 3)]

    def rewind(self, length: int) -> bool:
        if any(start < length < end for start, end, _ in self.shifts):
            return False   # inside an image's positions: the text after it can't continue there
        self.shifts = [s for s in self.shifts if s[1] <= length]
        return True

    def reset(self) -> None:
        self.shifts = []


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
