"""Recurrent state pairs (RNN / SSM / VAD state, a hybrid decoder's convolution windows and
linear-attention state): output of one step is input of the next.

An entry names one input/output pair, or with ``{layer}`` in both names one pair per layer the
session has (LFM2's ``past.{layer}.conv`` exist only for its convolution layers). The first
step gets zeros of the declared shape and dtype (absent: the session input's dtype), or of the
session input's own shape with its
batch axis the step's batch when no shape is declared (or a declared 1 on an open first
axis); a declared shape and the dtype are
checked against the session's input at load, so a wrong declaration fails there, not
mid-stream.

Such a state can't be cut back inside a run: the positions a multi-token run took in are folded
into it. With ``checkpoints`` N, the states after the last N runs are kept, so cutting back to
the length after one of those runs (a chat whose next prompt drops the final token) restores
exactly that state; any other length can't be restored.
"""

from __future__ import annotations

import re

from ..config.schema import RecurrentSpec
from ..errors import ConfigError
from .base import StateComponent, StepContext

LAYER = "{layer}"


def _layers(pattern: str, names) -> dict[int, str]:
    rx = re.compile("^" + re.escape(pattern).replace(re.escape(LAYER), r"(\d+)") + "$")
    found = {}
    for name in names:
        m = rx.match(name)
        if m:
            found[int(m.group(1))] = name
    return found


def pairs(session, spec: RecurrentSpec, file, path: str) -> list[tuple[str, str]]:
    """(input, output) names of ``spec`` in ``session``: one, or one per layer for a pattern."""
    if (LAYER in spec.input) != (LAYER in spec.output):
        raise ConfigError(f'input "{spec.input}" and output "{spec.output}": "{LAYER}" must be in '
                          "both names or in neither", file=file, path=f"{path}.output")
    if LAYER not in spec.input:
        if spec.layers:
            raise ConfigError(f'layers are only for names with "{LAYER}"; input is "{spec.input}"',
                              file=file, path=f"{path}.layers")
        return [(spec.input, spec.output)]
    found = _layers(spec.input, session.inputs)
    if spec.layers and sorted(set(spec.layers)) != sorted(found):
        raise ConfigError(f"layers {list(spec.layers)} declared, but session \"{session.name}\" has "
                          f'"{spec.input}" inputs for layers {sorted(found)}', file=file,
                          path=f"{path}.layers")
    out = []
    for layer in sorted(found):
        output = spec.output.replace(LAYER, str(layer))
        if output not in session.outputs:
            raise ConfigError(f'session "{session.name}" has input "{found[layer]}" but no output '
                              f'"{output}"', file=file, path=f"{path}.output")
        out.append((found[layer], output))
    return out


def owner(sessions, spec: RecurrentSpec, file, path: str):
    """The session with ``spec``'s input(s) and output(s), or an error naming ``path``."""
    for session in sessions:
        if LAYER in spec.input:
            if _layers(spec.input, session.inputs):
                return session
        elif spec.input in session.inputs and spec.output in session.outputs:
            return session
    what = "inputs matching" if LAYER in spec.input else "input"
    raise ConfigError(f'no session has {what} "{spec.input}" and output "{spec.output}"',
                      file=file, path=path)


class Recurrent(StateComponent):
    def __init__(self, backend, session, spec: RecurrentSpec, file: str | None = None, path: str = ""):
        """``session`` is the open session that has the state's inputs and outputs."""
        self.backend = backend
        self.session = session.name
        self.spec = spec
        self.pairs = pairs(session, spec, file, path)
        self.inputs = {session.name: {i for i, _ in self.pairs}}
        self.outputs = {session.name: {o for _, o in self.pairs}}
        self.shapes = {i: _shape(session, i, spec, file, path) for i, _ in self.pairs}
        self.dtypes = {i: spec.dtype or session.inputs[i].dtype for i, _ in self.pairs}
        self.values: dict[str, object] | None = None
        self.length = 0
        self.kept: list[tuple[int, dict[str, object]]] = []   # (length, values) of earlier runs

    def _initial(self, batch: int) -> dict[str, object]:
        return {i: self.backend.full(self.dtypes[i], tuple(batch if d is None else d for d in shape), 0)
                for i, shape in self.shapes.items()}

    def bind(self, session, feeds, bound, ctx):
        if self.values is None:
            self.values = self._initial(ctx.batch)
        for name, _ in self.pairs:
            feeds[name] = self.values[name]

    def update(self, session, outputs, ctx: StepContext):
        new = {i: outputs[o] for i, o in self.pairs}
        if self.values is not None:
            if self.spec.checkpoints:
                self.kept.append((self.length, self.values))
                while len(self.kept) > self.spec.checkpoints:
                    self._dispose(self.kept.pop(0)[1], new)
            else:
                self._dispose(self.values, new)
        self.values = new
        self.length = ctx.total_length

    def _dispose(self, values: dict, keep: dict) -> None:
        live = {id(v) for v in keep.values()}
        live.update(id(v) for _, vals in self.kept for v in vals.values())
        for value in values.values():
            if id(value) not in live:
                self.backend.dispose(value)

    def rewind(self, length: int) -> bool:
        if not self.spec.checkpoints:
            return False   # nothing kept: no earlier state to go back to
        if length == self.length:
            return True
        at = next((k for k, (n, _) in enumerate(self.kept) if n == length), None)
        if at is None:
            return False   # a position inside a run, or older than the checkpoints
        restored = self.kept[at][1]
        dropped = [self.values] + [vals for _, vals in self.kept[at + 1:]]
        self.kept = self.kept[:at]
        for values in dropped:
            self._dispose(values, restored)
        self.values, self.length = restored, length
        return True

    def cannot_rewind(self) -> str | None:
        names = ", ".join(f'"{i}"' for i, _ in self.pairs[:3]) + (", ..." if len(self.pairs) > 3 else "")
        return (f"the recurrent state {names} can't be cut back to a position inside a run "
                f"(it keeps only the states after its last {self.spec.checkpoints} runs: "
                f"pipeline.state.recurrent[].checkpoints)")

    def reset(self):
        kept, self.kept = self.kept, []
        for _, values in kept:
            self._dispose(values, self.values or {})
        if self.values is not None:
            for value in self.values.values():
                self.backend.dispose(value)
        self.values = None
        self.length = 0


def _shape(session, name: str, spec: RecurrentSpec, file, path: str) -> tuple:
    """The zero state's shape for input ``name``: the declared one (checked against the
    session), else the session's, None on the batch axis (the step's batch)."""
    info = session.inputs[name]
    where = f'session "{session.name}" input "{name}"'
    if spec.dtype is not None and info.dtype != spec.dtype:
        raise ConfigError(f'dtype "{spec.dtype}" does not match {where}, which is {info.dtype}',
                          file=file, path=f"{path}.dtype")
    have = "[" + ", ".join(str(d) if isinstance(d, int) else "?" for d in info.shape or ()) + "]"
    if not spec.shape:
        dims = list(info.shape or ())
        if not dims or any(not isinstance(d, int) for d in dims[1:]):
            raise ConfigError(f"no shape declared, and {where} is {have} (? is any size): only its "
                              "first (batch) axis may be open; declare the shape", file=file,
                              path=f"{path}.shape")
        return (None if not isinstance(dims[0], int) else dims[0], *dims[1:])
    if not info.shape:   # no shape known (an engine without metadata): nothing to compare
        return tuple(spec.shape)
    if len(info.shape) != len(spec.shape) or any(
            isinstance(d, int) and d != want for d, want in zip(info.shape, spec.shape)):
        raise ConfigError(f"shape {list(spec.shape)} does not fit {where}, which is {have} "
                          f"(? is any size)", file=file, path=f"{path}.shape")
    if any(d < 1 for d in spec.shape):
        raise ConfigError(f"shape {list(spec.shape)}: every size must be >= 1", file=file,
                          path=f"{path}.shape")
    if spec.shape[0] == 1 and not isinstance(info.shape[0], int):   # an open batch axis
        return (None, *spec.shape[1:])
    return tuple(spec.shape)
