"""The KV caches of several sequences as the rows of one batch (loops/batched.py).

One buffer per cached tensor, [B, heads, W, head], one row per active sequence, each row with
its own length (positions held); the rows are padded with zeros to one width W and the
attention mask says which columns are real. Two placements, chosen by the graph's attention:

- ``right`` (onnxruntime-genai's GroupQueryAttention): row i holds its positions in columns
  [0, len_i); the op reads each row's length from the mask (seqlens_k = sum(mask) - 1) and
  writes the new key at column len_i of that row, rotary position len_i. A shared buffer
  (past_present_share_buffer) is written in place and only grows; a separate present comes
  back one column wider.
- ``left`` (attention that concatenates past and new, transformers.js/Optimum exports):
  every step appends one column at W for all rows, so row i holds columns [W - len_i, W);
  position ids (or the model's cumsum of the mask) give each row its own positions.

A sequence joins after its own prefill (batch 1, the plain path): its cache is padded to the
batch's width and concatenated as a new row. A row that leaves is gathered out, and columns no
row uses any more are cropped. Every move is one engine call per dtype (ops/kv_rows.py).
"""

from __future__ import annotations

from ..ops import kv as kv_ops, kv_rows
from .kv_cache import SHARED_CHUNK

PLACEMENTS = ("right", "left")


class BatchedKV:
    """KV rows of the active sequences: ``lengths[i]`` positions held by row i."""

    def __init__(self, backend, provider: str, slots, placement: str, shared: bool):
        """``slots``: the bundle's KVCache slots (names and dtypes; their values stay the
        cache's); ``shared``: the present output is bound to the past buffer (written in place)."""
        if placement not in PLACEMENTS:
            raise ValueError(f"placement: expected one of {PLACEMENTS}, got {placement!r}")
        if shared and placement != "right":
            raise ValueError("a shared buffer is written at each row's own length: placement must be 'right'")
        self.backend = backend
        self.provider = provider
        self.names = [(slot.past.name, slot.present, slot.past.dtype) for slot in slots]
        self.placement = placement
        self.shared = shared
        self.values: list | None = None   # one tensor [B, H, W, D] per slot; None while no row is held
        self.lengths: list[int] = []
        self.width = 0

    @property
    def rows(self) -> int:
        return len(self.lengths)

    # ---- rows joining and leaving ------------------------------------------------------------

    def join(self, values: list, length: int, width: int) -> None:
        """Take one sequence's caches (one tensor [1, H, width, D] per slot, holding ``length``
        positions: at columns [0, length) from a prefill) as the last row; the tensors become ours."""
        if self.placement == "left" and width != length:
            values = self._run(kv_rows.crop_seq_many_graph, values, start=[0], end=[length])
            width = length
        if self.values is None:
            self.values, self.width = list(values), width
            self.lengths.append(length)
            if self.placement == "left" or self.shared:
                return
            self._crop_right()   # a separate GQA past is exactly max(len) wide
            return
        new_width = max(self.width, width)
        grow_x, grow_r = new_width - self.width, new_width - width
        if self.placement == "left":
            pads_x, pads_r = [0, 0, grow_x, 0, 0, 0, 0, 0], [0, 0, grow_r, 0, 0, 0, 0, 0]
        else:
            pads_x, pads_r = [0, 0, 0, 0, 0, 0, grow_x, 0], [0, 0, 0, 0, 0, 0, grow_r, 0]
        joined = self._run(kv_rows.join_rows_many_graph, self.values, values, pads_x=pads_x, pads_r=pads_r)
        self.backend.dispose_many(list(values))
        self.values, self.width = joined, new_width
        self.lengths.append(length)
        if not self.shared and self.placement == "right":
            self._crop_right()

    def leave(self, rows: list[int]) -> None:
        """Drop the rows ``rows`` (indices into the current rows); the others keep their order."""
        drop = set(rows)
        keep = [i for i in range(self.rows) if i not in drop]
        if not keep:
            self.reset()
            return
        self.values = self._run(kv_ops.gather_batch_many_graph, self.values, index=keep)
        self.lengths = [self.lengths[i] for i in keep]
        longest = max(self.lengths)
        if self.placement == "left" and self.width > longest:   # columns only gone rows used
            self.values = self._run(kv_rows.crop_seq_many_graph, self.values,
                                    start=[self.width - longest], end=[self.width])
            self.width = longest
        elif self.placement == "right" and not self.shared:
            self._crop_right()

    def _crop_right(self) -> None:
        longest = max(self.lengths)
        if self.width > longest:
            self.values = self._run(kv_rows.crop_seq_many_graph, self.values, start=[0], end=[longest])
            self.width = longest

    # ---- one decode step -----------------------------------------------------------------------

    def bind(self, feeds: dict, bound: dict) -> None:
        """The past inputs of one step (a shared buffer first grown to hold every row's next
        position, and bound as the present output)."""
        if self.shared and self.width < max(self.lengths) + 1:
            need = max(self.lengths) + 1
            grown = -(-max(need, 2 * self.width) // SHARED_CHUNK) * SHARED_CHUNK
            self.values = self._run(kv_rows.pad_seq_many_graph, self.values,
                                    pads=[0, 0, 0, 0, 0, 0, grown - self.width, 0])
            self.width = grown
        for (past, present, _), value in zip(self.names, self.values):
            feeds[past] = value
            if self.shared:
                bound[present] = value

    def mask(self) -> tuple[list[int], tuple[int, int]]:
        """The attention mask of one step that adds a token to every row: (flat values, shape)."""
        lengths = self.lengths
        if self.placement == "left":
            width = self.width + 1
            flat = [v for n in lengths for v in [0] * (self.width - n) + [1] * (n + 1)]
        else:
            width = max(lengths) + 1
            flat = [v for n in lengths for v in [1] * (n + 1) + [0] * (width - n - 1)]
        return flat, (len(lengths), width)

    def update(self, outputs: dict) -> None:
        """Take the presents of a step that added one position to every row."""
        self.lengths = [n + 1 for n in self.lengths]
        if self.shared:
            return   # written in place
        old = self.values
        self.values = [outputs[present] for _, present, _ in self.names]
        self.backend.dispose_many(old)
        self.width += 1

    def reset(self) -> None:
        if self.values is not None:
            self.backend.dispose_many(self.values)
        self.values, self.lengths, self.width = None, [], 0

    # ---- engine calls --------------------------------------------------------------------------

    def _run(self, graph_for, values: list, second: list | None = None, **ints) -> list:
        """Each slot's tensor replaced by ``graph_for(dtype, count)``'s ``y{i}`` of it (and of
        ``second``'s, as ``r{i}``), one engine call per dtype; the inputs are disposed."""
        backend = self.backend
        given = {name: backend.tensor(list(v), "int64", (len(v),)) for name, v in ints.items()}
        out = list(values)
        for dtype in sorted({d for _, _, d in self.names}):
            group = [i for i, (_, _, d) in enumerate(self.names) if d == dtype]
            graph = backend.open_graph(graph_for(dtype, len(group)), self.provider)
            feeds = dict(given)
            for j, i in enumerate(group):
                feeds[f"x{j}"] = values[i]
                if second is not None:
                    feeds[f"r{j}"] = second[i]
            made = backend.run(graph, feeds, [f"y{j}" for j in range(len(group))])
            for j, i in enumerate(group):
                out[i] = made[f"y{j}"]
        backend.dispose_many(list(values))
        backend.dispose_many(list(given.values()))
        return out
