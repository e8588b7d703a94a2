"""One interface for all state carried between steps (KV cache, positions, mask, RNN state).

The executor never special-cases any of them: before a session runs it asks every component
to ``bind`` the inputs it owns; after, to ``update`` from the outputs it owns; a chat that
goes back in history calls ``rewind``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class StepContext:
    past_length: int      # tokens already in the state before this step
    new_length: int       # tokens this step adds
    batch: int = 1
    inputs: dict | None = None   # the phase's pipeline inputs (input_ids; image grids for mRoPE)

    @property
    def total_length(self) -> int:
        return self.past_length + self.new_length


class StateComponent:
    """Base class: a component owns some inputs and outputs of some sessions."""

    #: session name -> input names this component feeds
    inputs: dict[str, set[str]]
    #: session name -> output names this component consumes
    outputs: dict[str, set[str]]

    def bind(self, session: str, feeds: dict[str, Any], bound: dict[str, Any], ctx: StepContext) -> None:
        """Add this component's inputs to ``feeds`` (and preallocated outputs to ``bound``)."""

    def update(self, session: str, outputs: dict[str, Any], ctx: StepContext) -> None:
        """Take this component's outputs after the session ran."""

    def rewind(self, length: int) -> bool:
        """Keep only the first ``length`` positions; False if this component can't."""
        return True

    def cannot_rewind(self) -> str | None:
        """Why this component can't drop the positions a step just added (speculative decoding
        does after rejected drafts), or None when it can."""
        return None

    def reorder(self, index: list[int]) -> None:
        """Row i of the batch becomes what row ``index[i]`` was (beam search; ``len(index)`` may
        differ from the batch). A component that takes no outputs derives its inputs from the
        step's lengths and holds nothing per row."""
        if self.outputs:
            raise NotImplementedError(self.cannot_reorder())

    def cannot_reorder(self) -> str | None:
        """Why beam search can't reorder this component's rows, or None when it can."""
        if not self.outputs:
            return None
        return f"the state component {type(self).__name__} keeps per-sequence values beam search can't reorder"

    def reset(self) -> None:
        """Back to the empty state of a new conversation."""
