"""The ``use_cache_branch`` switch of Optimum's merged decoders, derived from the step's lengths.

A merged decoder holds its no-past and with-past graphs under one ONNX ``If``: the first step
(empty past) takes the no-past branch, every later one the with-past branch.
"""

from __future__ import annotations

from ..backends.base import TensorInfo
from .base import StateComponent, StepContext


class CacheBranch(StateComponent):
    """A bool tensor (shape as the session declares, [1] or []) true once the past holds tokens."""

    def __init__(self, backend, infos: dict[str, TensorInfo]):
        self.backend = backend
        self.infos = infos            # session -> info of its switch input
        self.inputs = {s: {i.name} for s, i in infos.items()}
        self.outputs = {}
        self._made: dict[tuple[str, bool], object] = {}   # two values only: made once, fed every step

    def bind(self, session, feeds, bound, ctx: StepContext):
        info = self.infos[session]
        key = (session, ctx.past_length > 0)
        value = self._made.get(key)
        if value is None:
            value = self._made[key] = self.backend.tensor([key[1]], info.dtype, (1,) * len(info.shape))
        feeds[info.name] = value
