"""Cross-attention keys/values that a merged decoder computes itself on its first step.

Optimum's encoder-decoder export (transformers.js Whisper, Marian, T5 folders) puts them in the
decoder: ``past_key_values.N.encoder.key/value`` in, ``present.N.encoder.key/value`` out. On the
first step (``use_cache_branch`` false, an empty past) the no-past branch projects
``encoder_hidden_states`` and outputs them; every later step reads them back from the inputs,
and the with-past branch outputs constants in their place. So: fed empty (sequence length 0)
while the past is empty, taken from that step's outputs, fed unchanged on every later step;
what a later step outputs under those names is dropped. Declared by ``state.cross_kv``.
"""

from __future__ import annotations

import re

from ..config.schema import CrossKVSpec
from ..errors import ConfigError
from .base import StateComponent, StepContext

PATH = "$.pipeline.state.cross_kv"


def _rx(pattern: str, file: str, key: str) -> re.Pattern:
    if pattern.count("{layer}") != 1 or pattern.count("{kv}") != 1:
        raise ConfigError(f'expected a name with one "{{layer}}" and one "{{kv}}", found "{pattern}"',
                          file=file, path=f"{PATH}.{key}")
    parts = re.split(r"(\{layer\}|\{kv\})", pattern)
    body = "".join({"{layer}": r"(?P<layer>\d+)", "{kv}": r"(?P<kv>key|value)"}.get(p, re.escape(p))
                   for p in parts)
    return re.compile(f"^{body}$")


def find(session, spec: CrossKVSpec, file: str) -> dict[str, str]:
    """past input -> present output of ``session`` matched by the patterns (empty if none)."""
    past_rx = _rx(spec.past_pattern, file, "past_pattern")
    _rx(spec.present_pattern, file, "present_pattern")
    pairs = {}
    for name in session.inputs:
        m = past_rx.match(name)
        if m is None:
            continue
        present = spec.present_pattern.replace("{layer}", m["layer"]).replace("{kv}", m["kv"])
        if present not in session.outputs:
            raise ConfigError(f'session "{session.name}" has input "{name}" but no output "{present}" '
                              f"(outputs: {', '.join(session.outputs)})", file=file,
                              path=f"{PATH}.present_pattern")
        pairs[name] = present
    return pairs


class CrossKV(StateComponent):
    def __init__(self, backend, session, pairs: dict[str, str], heads: int | None, head_size: int | None,
                 file: str):
        self.backend = backend
        self.session = session.name
        self.pairs = pairs
        self.inputs = {session.name: set(pairs)}
        self.outputs = {session.name: set(pairs.values())}
        self.infos = {name: session.inputs[name] for name in pairs}
        self.values: dict[str, object] = {}
        self._empty: dict[tuple[str, int], object] = {}   # made once per batch size, fed every first step
        self._dims: dict[str, list] = {}
        for name, info in self.infos.items():
            shape = list(info.shape)
            if len(shape) != 4:
                raise ConfigError(f'input "{name}" of session "{session.name}": expected 4 dims [batch, heads, '
                                  f"length, head_size], found {shape}", file=file, path=PATH)
            for axis, fallback, what in ((1, heads, "num_heads"), (3, head_size, "head_size")):
                if not isinstance(shape[axis], int):
                    if fallback is None:
                        raise ConfigError(f'input "{name}" of session "{session.name}" leaves dim {axis} '
                                          f'("{shape[axis]}") symbolic: give $.pipeline.state.kv_cache.{what}',
                                          file=file, path=PATH)
                    shape[axis] = fallback
            self._dims[name] = shape

    def bind(self, session, feeds, bound, ctx: StepContext):
        if ctx.past_length == 0 or not self.values:
            for name, info in self.infos.items():
                value = self._empty.get((name, ctx.batch))
                if value is None:
                    shape = list(self._dims[name])
                    shape[0], shape[2] = ctx.batch, 0
                    value = self._empty[(name, ctx.batch)] = self.backend.tensor([], info.dtype, tuple(shape))
                feeds[name] = value
            return
        feeds.update(self.values)

    def update(self, session, outputs, ctx: StepContext):
        made = [outputs[p] for p in self.pairs.values()]
        if ctx.past_length == 0:
            old = [v for v in self.values.values() if all(v is not m for m in made)]
            self.values = {past: outputs[present] for past, present in self.pairs.items()}
            self.backend.dispose_many(old)
        else:   # the with-past branch's placeholders
            self.backend.dispose_many([m for m in made if all(m is not v for v in self.values.values())])

    def rewind(self, length: int) -> bool:
        return True   # independent of the decoded length (a rewind to 0 recomputes them)

    def reset(self):
        self.backend.dispose_many(list(self.values.values()))
        self.values = {}
