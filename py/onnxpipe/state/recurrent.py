"""Recurrent state pairs (RNN / SSM / VAD state): output of one step is input of the next."""

from __future__ import annotations

from ..config.schema import RecurrentSpec
from .base import StateComponent


class Recurrent(StateComponent):
    def __init__(self, backend, session: str, spec: RecurrentSpec):
        self.backend = backend
        self.session = session
        self.spec = spec
        self.inputs = {session: {spec.input}}
        self.outputs = {session: {spec.output}}
        self.value = None

    def _initial(self):
        return self.backend.full(self.spec.dtype, self.spec.shape, 0)

    def bind(self, session, feeds, bound, ctx):
        if self.value is None:
            self.value = self._initial()
        feeds[self.spec.input] = self.value

    def update(self, session, outputs, ctx):
        new = outputs[self.spec.output]
        if self.value is not None and self.value is not new:
            self.backend.dispose(self.value)
        self.value = new

    def rewind(self, length: int) -> bool:
        return False  # a recurrent state can't be cut back without replaying

    def reset(self):
        if self.value is not None:
            self.backend.dispose(self.value)
        self.value = None

