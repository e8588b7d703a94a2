"""KV cache: layers and shapes discovered from the session's I/O, fed back by handle.

Formats: ``separate`` (past_key_values.{layer}.key/value -> present.*), ``combined``
(past_{layer} -> present_{layer}, K and V stacked) and ``shared_buffer`` (onnxruntime-genai's
past_present_share_buffer: one max-length buffer per tensor, bound as both the past input and
the present output, which GroupQueryAttention updates in place).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..backends.base import TensorInfo
from ..config.schema import KVCacheSpec
from ..errors import ConfigError
from ..ops import kv as kv_ops
from .base import StateComponent, StepContext

SEPARATE_DEFAULTS = ("past_key_values.{layer}.key", "past_key_values.{layer}.value",
                     "present.{layer}.key", "present.{layer}.value")
COMBINED_DEFAULTS = (("past_{layer}", "present_{layer}"), ("past_key_values.{layer}", "present.{layer}"))
SHARED_CHUNK = 256  # shared buffers grow in steps of this many positions


def _regex(pattern: str) -> re.Pattern:
    return re.compile("^" + re.escape(pattern).replace(r"\{layer\}", r"(\d+)") + "$")


def _layers(pattern: str, names) -> dict[int, str]:
    rx = _regex(pattern)
    found = {}
    for name in names:
        m = rx.match(name)
        if m:
            found[int(m.group(1))] = name
    return found


@dataclass
class Slot:
    """One cached tensor: the past input it feeds and the present output it comes from."""

    past: TensorInfo
    present: str
    value: object = None


def discover(session, spec: KVCacheSpec, file: str) -> tuple[str, list[Slot]] | None:
    """(format, slots) for ``session``, or None if it has no KV cache inputs."""
    inputs, outputs = session.inputs, session.outputs
    fmt = spec.format
    pairs: list[tuple[str, str]] = []
    if fmt in ("auto", "separate", "shared_buffer"):
        pk = spec.past_key_pattern or SEPARATE_DEFAULTS[0]
        pv = spec.past_value_pattern or SEPARATE_DEFAULTS[1]
        ok = spec.present_key_pattern or SEPARATE_DEFAULTS[2]
        ov = spec.present_value_pattern or SEPARATE_DEFAULTS[3]
        keys, values = _layers(pk, inputs), _layers(pv, inputs)
        if keys:
            pairs = [(keys[i], ok.replace("{layer}", str(i))) for i in sorted(keys)]
            pairs += [(values[i], ov.replace("{layer}", str(i))) for i in sorted(values)]
            fmt = "separate" if fmt == "auto" else fmt
    if not pairs and fmt in ("auto", "combined"):
        candidates = [(spec.past_pattern, spec.present_pattern)] if spec.past_pattern else COMBINED_DEFAULTS
        for past_pat, present_pat in candidates:
            found = _layers(past_pat, inputs)
            if found:
                present_pat = present_pat or "present_{layer}"
                pairs = [(found[i], present_pat.replace("{layer}", str(i))) for i in sorted(found)]
                fmt = "combined"
                break
    if not pairs:
        return None
    for past, present in pairs:
        if present not in outputs:
            raise ConfigError(f'session "{session.name}" has KV input "{past}" but no output '
                              f'"{present}". Its outputs: {", ".join(outputs)}', file=file,
                              path="$.pipeline.state.kv_cache")
    return fmt, [Slot(inputs[p], o) for p, o in pairs]


class KVCache(StateComponent):
    def __init__(self, backend, session, spec: KVCacheSpec, max_length: int, file: str,
                 provider: str = "cpu"):
        found = discover(session, spec, file)
        assert found is not None
        self.format, self.slots = found
        if spec.sliding_window is not None:
            raise ConfigError("kv_cache.sliding_window is not supported by this runtime yet",
                              file=file, path="$.pipeline.state.kv_cache.sliding_window")
        if self.format == "shared_buffer" and not backend.supports_bound_outputs:
            self.format = "separate"   # GroupQueryAttention also takes a growing past
        self.backend = backend
        self.spec = spec
        self.session = session.name
        self.provider = provider
        self.max_length = max_length
        self.capacity = 0
        self.inputs = {session.name: {s.past.name for s in self.slots}}
        self.outputs = {session.name: {s.present for s in self.slots}}
        self.seq_axis = {s.past.name: len(s.past.shape) - 2 for s in self.slots}
        for slot in self.slots:
            self._check_shape(slot, file)

    def _check_shape(self, slot: Slot, file: str) -> None:
        dims = self._dims(slot)
        if sum(d is None for d in dims) > 1:
            raise ConfigError(f'KV input "{slot.past.name}" has dims {list(slot.past.shape)}: only the '
                              "batch and sequence dims may be symbolic; give the others as "
                              "kv_cache.num_heads / kv_cache.head_size", file=file,
                              path="$.pipeline.state.kv_cache")

    def _dims(self, slot: Slot) -> list:
        """Fixed dims with heads / head size filled from the spec; None for batch; seq -1."""
        shape = slot.past.shape
        seq = self.seq_axis[slot.past.name]
        dims = [d if isinstance(d, int) else None for d in shape]
        dims[seq] = -1
        if dims[-1] is None and self.spec.head_size:
            dims[-1] = self.spec.head_size
        if dims[seq - 1] is None and self.spec.num_heads:
            dims[seq - 1] = self.spec.num_heads
        return dims

    def _shape(self, slot: Slot, batch: int, length: int) -> tuple[int, ...]:
        return tuple(length if d == -1 else batch if d is None else d for d in self._dims(slot))

    # ---- the state interface ---------------------------------------------------------------

    def bind(self, session, feeds, bound, ctx: StepContext):
        if self.format == "shared_buffer":
            self._ensure_capacity(ctx)
            for slot in self.slots:
                feeds[slot.past.name] = slot.value
                bound[slot.present] = slot.value
            return
        for slot in self.slots:
            if slot.value is None:
                slot.value = self.backend.full(slot.past.dtype, self._shape(slot, ctx.batch, 0), 0)
            feeds[slot.past.name] = slot.value

    def update(self, session, outputs, ctx: StepContext):
        if self.format == "shared_buffer":
            return
        old = []
        for slot in self.slots:
            old.append(slot.value)
            slot.value = outputs[slot.present]
        self.backend.dispose_many(old)

    def rewind(self, length: int) -> bool:
        if self.format == "shared_buffer":
            return True  # positions past ``length`` are simply overwritten
        if self.format != "separate":
            return False
        for slot in self.slots:
            if slot.value is not None:
                graph = self.backend.open_graph(kv_ops.slice_seq_graph(slot.past.dtype), self.provider)
                length_t = self.backend.tensor([length], "int64", (1,))
                new = self.backend.run(graph, {"x": slot.value, "length": length_t}, ["y"])["y"]
                self.backend.dispose(slot.value)
                slot.value = new
        return True

    def reset(self):
        for slot in self.slots:
            if slot.value is not None:
                self.backend.dispose(slot.value)
            slot.value = None
        self.capacity = 0

    # ---- shared buffers ----------------------------------------------------------------------

    def _ensure_capacity(self, ctx: StepContext) -> None:
        need = ctx.total_length
        if need <= self.capacity:
            return
        grown = max(need, 2 * self.capacity, SHARED_CHUNK)
        grown = min(-(-grown // SHARED_CHUNK) * SHARED_CHUNK, max(self.max_length, need))
        for slot in self.slots:
            if slot.value is None:
                slot.value = self.backend.full(slot.past.dtype, self._shape(slot, ctx.batch, grown), 0)
                continue
            graph = self.backend.open_graph(kv_ops.grow_seq_graph(slot.past.dtype), self.provider)
            cap = self.backend.tensor([grown], "int64", (1,))
            new = self.backend.run(graph, {"x": slot.value, "capacity": cap}, ["y"])["y"]
            self.backend.dispose(slot.value)
            slot.value = new
        self.capacity = grown
