"""KV cache: layers and shapes discovered from the session's I/O, fed back by handle.

One class per layout behind the state interface, chosen by ``make_kv_cache``: ``separate``
(past_key_values.{layer}.key/value -> present.*), ``combined`` (past_{layer} ->
present_{layer}, K and V stacked), ``shared_buffer`` (onnxruntime-genai's
past_present_share_buffer: one max-length buffer per tensor, bound as both the past input and
the present output, which GroupQueryAttention updates in place), and either of the first and
last with sliding-window layers (fixed buffers the attention op evicts from: sliding_window.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..backends.base import TensorInfo
from ..config.schema import KVCacheSpec
from ..errors import ConfigError, EngineError
from ..ops import kv as kv_ops
from . import kv_dims
from .base import StateComponent, StepContext
from .sliding_window import PATH as SLIDING_PATH, Windowing

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


def discover(session, spec: KVCacheSpec, file: str,
             exclude: frozenset[str] = frozenset()) -> tuple[str, list[Slot]] | None:
    """(format, slots) for ``session``, or None if it has no KV cache inputs; inputs in
    ``exclude`` (another component's, e.g. frozen cross-attention keys) are never taken."""
    inputs, outputs = session.inputs, session.outputs
    if exclude:
        inputs = {k: v for k, v in inputs.items() if k not in exclude}
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


def slot_layers(spec: KVCacheSpec, slots: list[Slot]) -> dict[str, int]:
    """Past input name -> model layer index, for separate key/value caches."""
    names = [s.past.name for s in slots]
    patterns = (spec.past_key_pattern or SEPARATE_DEFAULTS[0],
                spec.past_value_pattern or SEPARATE_DEFAULTS[1])
    return {name: layer for pattern in patterns for layer, name in _layers(pattern, names).items()}


class KVCache(StateComponent):
    """What every layout shares: the slots, their fixed dims, zero-filled and engine-side
    transforms, and giving tensors back. A subclass per layout says how a step binds and takes
    back its tensors and whether it can be cut back or reordered; ``make_kv_cache`` picks it."""

    format: str = ""   # the layout's name in pipeline.json (kv_cache.format)
    window: Windowing | None = None
    bounded: frozenset[str] = frozenset()   # past inputs whose buffer has a fixed capacity

    def __init__(self, backend, session, spec: KVCacheSpec, slots: list[Slot], max_length: int,
                 file: str, provider: str = "cpu"):
        self.slots = slots
        # slots whose sequence length follows the tokens taken in
        self.growing = [slot for slot in slots if slot.past.name not in self.bounded]
        self.backend = backend
        self.spec = spec
        self.session = session.name
        self.provider = provider
        self.max_length = max_length
        self.inputs = {session.name: {s.past.name for s in self.slots}}
        self.outputs = {session.name: {s.present for s in self.slots}}
        self.seq_axis = {s.past.name: len(s.past.shape) - 2 for s in self.slots}
        self._fixed: dict[str, tuple] = {}
        self._graph = kv_dims.SessionGraph(backend, session)   # read only if a dim is symbolic, or windowed
        for slot in self.slots:
            self._check_shape(slot, file)

    def _check_shape(self, slot: Slot, file: str) -> None:
        seq = self.seq_axis[slot.past.name]
        self._fixed[slot.past.name] = kv_dims.resolve(slot, seq, self.spec, self._graph, file)

    def _dims(self, slot: Slot) -> list:
        """Fixed dims (the session's, the spec's, or detected in the graph: kv_dims.py); None
        for batch; seq -1."""
        return list(self._fixed[slot.past.name])

    def _shape(self, slot: Slot, batch: int, length: int) -> tuple[int, ...]:
        return tuple(length if d == -1 else batch if d is None else d for d in self._dims(slot))

    def _empty_length(self, slot: Slot) -> int:
        """Sequence length of an empty past."""
        return 0

    def _zeros(self, slot, shape) -> object:
        """A zero cache tensor of ``shape`` for ``slot``; one too large to allocate (a wrong
        num_heads / head_size, a huge context) is an error naming the input, not a MemoryError."""
        try:
            return self.backend.full(slot.past.dtype, shape, 0)
        except (MemoryError, ValueError) as exc:   # numpy: MemoryError, or ValueError past its size limit
            raise EngineError(f'session "{self.session}": cannot allocate the KV cache of "{slot.past.name}" '
                              f"with shape {list(shape)} ({exc}); check kv_cache.num_heads / head_size "
                              f"and the context length") from None

    def _transform(self, slots: list[Slot], graph_for, name: str, values: list[int]) -> None:
        """Replace each slot's tensor by ``graph_for(dtype, count)``'s ``y{i}`` of it, given the
        int64 input ``name``: one engine call per dtype, not one per tensor (in the browser each
        call crosses from Python to JavaScript)."""
        given = self.backend.tensor(values, "int64", (len(values),))
        for dtype in sorted({slot.past.dtype for slot in slots}):
            group = [slot for slot in slots if slot.past.dtype == dtype]
            graph = self.backend.open_graph(graph_for(dtype, len(group)), self.provider)
            feeds = {f"x{i}": slot.value for i, slot in enumerate(group)}
            feeds[name] = given
            outs = self.backend.run(graph, feeds, [f"y{i}" for i in range(len(group))])
            self.backend.dispose_many([slot.value for slot in group])
            for i, slot in enumerate(group):
                slot.value = outs[f"y{i}"]
        self.backend.dispose(given)

    # ---- the state interface: what the layouts share -------------------------------------

    def bind(self, session, feeds, bound, ctx: StepContext):
        """A growing past: empty (zero-filled) on the first step, the last present after."""
        for slot in self.slots:
            if slot.value is None:
                slot.value = self._zeros(slot, self._shape(slot, ctx.batch, self._empty_length(slot)))
            feeds[slot.past.name] = slot.value

    def update(self, session, outputs, ctx: StepContext):
        old = []
        for slot in self.slots:
            old.append(slot.value)
            slot.value = outputs[slot.present]
        self.backend.dispose_many(old)

    def reorder(self, index: list[int]) -> None:
        """Every cached tensor's rows gathered by ``index`` along the batch axis, in one engine
        call per dtype (ops/kv.py); nothing passes through Python."""
        held = [slot for slot in self.slots if slot.value is not None]
        self._transform(held, kv_ops.gather_batch_many_graph, "index", list(index))

    def cannot_reorder(self) -> str | None:
        return None

    def reset(self):
        for slot in self.slots:
            if slot.value is not None:
                self.backend.dispose(slot.value)
            slot.value = None


class SeparateKVCache(KVCache):
    """past_key_values.{layer}.key/value -> present.*: a past that grows by each step's tokens,
    cut back along the sequence axis in the engine."""

    format = "separate"

    def rewind(self, length: int) -> bool:
        # not the bounded (windowed) layers: the op reads their resident rows from the mask's
        # length, and stale rows get overwritten
        cut = [slot for slot in self.growing if slot.value is not None]
        direct = getattr(self.backend, "slice_seq_many", None)   # the web backend's, in JavaScript
        made = direct([slot.value for slot in cut], length) if direct is not None and cut else None
        if made is None:
            self._transform(cut, kv_ops.slice_seq_many_graph, "length", [length])
            return True
        self.backend.dispose_many([slot.value for slot in cut])
        for slot, value in zip(cut, made):
            slot.value = value
        return True


class CombinedKVCache(KVCache):
    """past_{layer} -> present_{layer}, K and V stacked in one tensor: fed back, never cut back
    or reordered (its leading axis is K/V, not the batch)."""

    format = "combined"

    def rewind(self, length: int) -> bool:
        return False

    def cannot_rewind(self) -> str | None:
        return f'the KV cache format "{self.format}" can\'t be cut back'

    def reorder(self, index: list[int]) -> None:
        raise NotImplementedError(self.cannot_reorder())

    def cannot_reorder(self) -> str | None:
        return f'the KV cache format "{self.format}" has no leading batch axis to reorder'


class SharedBufferKVCache(KVCache):
    """onnxruntime-genai's past_present_share_buffer: one buffer per tensor, grown in chunks,
    bound as both the past input and the present output, updated in place by the attention op."""

    format = "shared_buffer"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.capacity = 0

    def bind(self, session, feeds, bound, ctx: StepContext):
        self._ensure_capacity(ctx)
        for slot in self.slots:
            feeds[slot.past.name] = slot.value
            bound[slot.present] = slot.value

    def update(self, session, outputs, ctx: StepContext):
        return   # the attention op wrote into the bound buffers

    def rewind(self, length: int) -> bool:
        return True  # positions past ``length`` are simply overwritten

    def reset(self):
        super().reset()
        self.capacity = 0

    def _ensure_capacity(self, ctx: StepContext) -> None:
        need = ctx.total_length
        if need <= self.capacity:
            return
        grown = max(need, 2 * self.capacity, SHARED_CHUNK)
        grown = min(-(-grown // SHARED_CHUNK) * SHARED_CHUNK, max(self.max_length, need))
        for slot in self.slots:
            if slot.past.name in self.bounded:   # a fixed buffer: allocated once at its capacity, never grown
                if slot.value is None:
                    slot.value = self._zeros(slot, self._shape(slot, ctx.batch, self._empty_length(slot)))
                continue
            if slot.value is None:
                slot.value = self._zeros(slot, self._shape(slot, ctx.batch, grown))
                continue
            graph = self.backend.open_graph(kv_ops.grow_seq_graph(slot.past.dtype), self.provider)
            cap = self.backend.tensor([grown], "int64", (1,))
            new = self.backend.run(graph, {"x": slot.value, "capacity": cap}, ["y"])["y"]
            self.backend.dispose(slot.value)
            slot.value = new
        self.capacity = grown


class SlidingWindowKVCache(KVCache):
    """Sliding-window layers (state/sliding_window.py) over a separate or shared-buffer layout:
    their buffers hold a fixed capacity from the first step and the attention op evicts from
    them; the other layers keep their layout. A rewind is exact only while no needed row was
    evicted."""

    def __init__(self, backend, session, spec: KVCacheSpec, slots: list[Slot], max_length: int,
                 file: str, provider: str = "cpu", *, window: Windowing):
        self.window = window
        self.bounded = window.names
        super().__init__(backend, session, spec, slots, max_length, file, provider)
        self._check_window(file)

    def _check_window(self, file: str) -> None:
        """The declared window is the graph's (GroupQueryAttention's local_window_size): buffers of
        another size would be wrong, and a mistyped huge one is allocated whole."""
        facts = self._graph.facts()
        found = facts.attention_windows() if facts is not None else set()
        if found and self.window.size not in found:
            raise ConfigError(f"window_size is {self.window.size}, but the model's GroupQueryAttention nodes "
                              f"use local_window_size {', '.join(map(str, sorted(found)))}",
                              file=file, path=f"{SLIDING_PATH}.window_size")

    def _empty_length(self, slot: Slot) -> int:
        """A windowed layer's empty past is its whole fixed buffer."""
        return self.window.capacity if slot.past.name in self.bounded else 0

    def update(self, session, outputs, ctx: StepContext):
        self.window.total = ctx.total_length
        super().update(session, outputs, ctx)

    def rewind(self, length: int) -> bool:
        if not self.window.can_rewind(length):
            return False   # the rows needed at ``length`` were evicted: start over
        self.window.total = length
        return super().rewind(length)

    def cannot_rewind(self) -> str | None:
        return "the KV cache's sliding-window layers drop rows that going back would need"

    def reset(self):
        super().reset()
        self.window.total = 0


class SlidingSeparateKVCache(SlidingWindowKVCache, SeparateKVCache):
    """Sliding-window layers in a separate cache."""


class SlidingSharedBufferKVCache(SlidingWindowKVCache, SharedBufferKVCache):
    """Sliding-window layers in a shared-buffer cache."""


# layout -> class, without and with sliding-window layers (a combined cache can't have them:
# Windowing says so)
LAYOUTS: dict[str, type[KVCache]] = {
    "separate": SeparateKVCache,
    "combined": CombinedKVCache,
    "shared_buffer": SharedBufferKVCache,
}
SLIDING_LAYOUTS: dict[str, type[SlidingWindowKVCache]] = {
    "separate": SlidingSeparateKVCache,
    "shared_buffer": SlidingSharedBufferKVCache,
}


def _concatenates_past(backend, session) -> bool:
    """Does this file grow its past (no GroupQueryAttention to update a shared buffer in place)?
    A provider's file may spell attention out in standard ops (export/unfused_attention.py: the
    SmolLM2 bundle's ``wasm`` file) while the pipeline's other files share one buffer."""
    facts = kv_dims.SessionGraph(backend, session).facts()
    return facts is not None and not any(n.op_type == "GroupQueryAttention" for n in facts.graph.nodes)


def make_kv_cache(backend, session, spec: KVCacheSpec, max_length: int, file: str,
                  provider: str = "cpu", exclude: frozenset[str] = frozenset()) -> KVCache | None:
    """The KV cache of ``session``, of the class for its layout (found from the session's I/O
    and ``spec``), or None if it has no KV cache inputs; inputs in ``exclude`` are never taken."""
    found = discover(session, spec, file, exclude)
    if found is None:
        return None
    fmt, slots = found
    # sliding-window layers: fixed window-sized buffers the attention op evicts from itself
    window = None if spec.sliding_window is None else Windowing(
        spec.sliding_window, slot_layers(spec, slots), fmt, provider, max_length, file)
    if fmt == "shared_buffer" and (not backend.supports_bound_outputs or _concatenates_past(backend, session)):
        fmt = "separate"   # GroupQueryAttention also takes a growing past
    if window is None:
        return LAYOUTS[fmt](backend, session, spec, slots, max_length, file, provider)
    return SLIDING_LAYOUTS[fmt](backend, session, spec, slots, max_length, file, provider, window=window)
