"""The Backend protocol: everything the runtime asks of an inference engine.

Tensors live in the engine; Python holds opaque handles. Small values (one token id, a few
position ids) cross as Python lists; large ones (logits, KV cache) never do.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

Tensor = Any  # an engine-owned handle (onnxruntime.OrtValue natively, ort.Tensor in the browser)


class Items(list):
    """Per-item pipeline input values: a list of host values ``(flat values, shape)``, one per
    item. An image front end gives each image's tensors as one item (their shapes differ, so
    they can't be one batch); a ``loop: per_image`` flow step runs once per item."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str                       # "float32", "float16", "int64", ...
    shape: tuple[int | str | None, ...]  # ints for fixed dims, names (or None) for symbolic ones


class Session(Protocol):
    name: str
    provider: str                       # the execution provider it actually got
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    path: str                           # the model file it was opened from ("" for runtime graphs)


class RangeReader(Protocol):
    """Random access to a model file's bytes (onnx_info reads a graph without its weights)."""

    size: int

    def read(self, offset: int, n: int) -> bytes: ...

    def close(self) -> None: ...


class Backend(Protocol):
    name: str
    providers: tuple[str, ...]          # providers this engine offers, best first

    supports_bound_outputs: bool          # can write outputs into given tensors (shared KV)

    def open_session(self, name: str, path: str, providers: Sequence[str],
                     options: dict[str, Any], external_data: Sequence[str] = ()) -> Session:
        """Open ``path``; ``external_data`` names the weight files it refers to."""

    def model_reader(self, path: str) -> RangeReader:
        """Range reads of the model file ``path`` (a session's ``path``), never the whole file."""

    def open_graph(self, model: bytes, provider: str) -> Session:
        """A runtime-owned graph (sampler, cache ops) on ``provider``; cached by content."""

    def tensor(self, values: Sequence[int] | Sequence[float], dtype: str,
               shape: Sequence[int]) -> Tensor: ...

    def full(self, dtype: str, shape: Sequence[int], value: float | int) -> Tensor: ...

    def run(self, session: Session, feeds: dict[str, Tensor], outputs: Sequence[str],
            bound: dict[str, Tensor] | None = None) -> dict[str, Tensor]:
        """Run; ``bound`` maps output names to preallocated tensors written in place."""

    def to_list(self, tensor: Tensor) -> list: ...

    def to_float32(self, tensor: Tensor) -> array:
        """A float tensor's values as a flat ``array('f')``, copied in one block (waveforms)."""

    def shape(self, tensor: Tensor) -> tuple[int, ...]: ...

    def dispose(self, tensor: Tensor) -> None: ...

    def dispose_many(self, tensors: list[Tensor]) -> None:
        """Dispose several at once (one engine call where crossings are costly)."""
