"""Recurrent state pairs (RNN / SSM / VAD state): output of one step is input of the next.

The first step gets zeros of the declared shape and dtype; both are checked against the
session's own input at load, so a wrong declaration fails there, not mid-stream.
"""

from __future__ import annotations

from ..config.schema import RecurrentSpec
from ..errors import ConfigError
from .base import StateComponent


class Recurrent(StateComponent):
    def __init__(self, backend, session, spec: RecurrentSpec, file: str | None = None, path: str = ""):
        """``session`` is the open session that has the state's input and output."""
        self.backend = backend
        self.session = session.name
        self.spec = spec
        self.inputs = {session.name: {spec.input}}
        self.outputs = {session.name: {spec.output}}
        self.value = None
        _check(session, spec, file, path)

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

    def cannot_rewind(self) -> str | None:
        return f'the recurrent state "{self.spec.input}" can\'t be cut back without replaying'

    def reset(self):
        if self.value is not None:
            self.backend.dispose(self.value)
        self.value = None



def _check(session, spec: RecurrentSpec, file, path: str) -> None:
    info = session.inputs[spec.input]
    where = f'session "{session.name}" input "{spec.input}"'
    if info.dtype != spec.dtype:
        raise ConfigError(f'dtype "{spec.dtype}" does not match {where}, which is {info.dtype}',
                          file=file, path=f"{path}.dtype")
    if not info.shape:   # no shape known (an engine without metadata): nothing to compare
        return
    have = "[" + ", ".join(str(d) if isinstance(d, int) else "?" for d in info.shape) + "]"
    if len(info.shape) != len(spec.shape) or any(
            isinstance(d, int) and d != want for d, want in zip(info.shape, spec.shape)):
        raise ConfigError(f"shape {list(spec.shape)} does not fit {where}, which is {have} "
                          f"(? is any size)", file=file, path=f"{path}.shape")
    if any(d < 1 for d in spec.shape):
        raise ConfigError(f"shape {list(spec.shape)}: every size must be >= 1", file=file,
                          path=f"{path}.shape")
