"""Answers the graph already holds, asked where a config would otherwise have to say them.

KV head count and head size (for a KV input whose dims are symbolic), tried in this order:

1. ``declared``: the graph's own shape for the present output (graph output or value_info);
2. ``attention``: the attention node reading the past input (attention.py: GroupQueryAttention
   / MultiHeadAttention / ONNX Attention attributes, head size from the key projection's
   initializer shape or a Reshape constant);
3. ``traced``: the present output's dims traced back through the graph (e.g. a torch export's
   Concat(past, Transpose(Reshape(MatMul(x, W_k), [.., heads, head]))).

Each answer carries its source in words, so logs and errors can say how it was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .attention import kv_layout
from .model import GraphInfo
from .shapes import StaticShapes


@dataclass(frozen=True)
class Detected:
    value: int
    source: str          # "declared: ...", "attention: ...", "traced: ..."


@dataclass
class KVDims:
    heads: Detected | None = None
    head_size: Detected | None = None
    looked_at: list[str] = field(default_factory=list)   # every place tried, for the error


class GraphFacts:
    """Detection over one graph (its static shapes computed once, on demand)."""

    def __init__(self, graph: GraphInfo):
        self.graph = graph.flattened()   # a merged decoder's attention sits in If branches
        self.shapes = StaticShapes(self.graph)

    # ---- KV cache -------------------------------------------------------------------------

    def attention_windows(self) -> set[int]:
        """The ``local_window_size`` values (> 0) of the graph's GroupQueryAttention nodes."""
        return {n.attrs["local_window_size"] for n in self.graph.nodes
                if n.op_type == "GroupQueryAttention" and isinstance(n.attrs.get("local_window_size"), int)
                and n.attrs["local_window_size"] > 0}

    def kv_dims(self, past: str, present: str) -> KVDims:
        """Heads (the dim before the sequence) and head size (the last dim) of one KV pair;
        the layout is [..., heads, sequence, head_size], as kv_cache.py binds it."""
        out = KVDims()

        def offer(heads, size, source):
            if out.heads is None and isinstance(heads, int) and heads > 0:
                out.heads = Detected(heads, source)
            if out.head_size is None and isinstance(size, int) and size > 0:
                out.head_size = Detected(size, source)

        declared = self.graph.declared(present)
        out.looked_at.append(f'the graph\'s declared shape of "{present}"')
        if declared is not None and declared.dims and len(declared.dims) >= 3:
            offer(declared.dims[-3], declared.dims[-1], f'declared: shape of "{present}" in the graph')
        if out.heads is None or out.head_size is None:
            users = [n for n in self.graph.consumers(past) if kv_layout(self.shapes, n) is not None]
            out.looked_at.append(f'attention nodes reading "{past}" (found: '
                                 f'{", ".join(n.op_type for n in users) or "none"})')
            for node in users:
                layout = kv_layout(self.shapes, node)
                offer(layout.heads, layout.head_size, f"attention: {layout.how}")
        if out.heads is None or out.head_size is None:
            dims = self.shapes.dims(present)
            out.looked_at.append(f'"{present}" traced back through the graph ({_show(dims)})')
            if dims is not None and len(dims) >= 3:
                origin = self.shapes.origin(present)
                offer(dims[-3], dims[-1], f"traced: {present} {_show(dims)}" + (f" via {origin}" if origin else ""))
        return out

    # ---- other facts ----------------------------------------------------------------------

    def vocab_size(self, logits: str = "logits", ids: str = "input_ids") -> Detected | None:
        """The logits' last dim: declared, traced (the lm_head weight), else the row count of
        the token embedding (a 2-D initializer gathered by the token input ``ids``)."""
        declared = self.graph.declared(logits)
        if declared is not None and declared.dims and isinstance(declared.dims[-1], int):
            return Detected(declared.dims[-1], f'declared: shape of "{logits}" in the graph')
        dims = self.shapes.dims(logits)
        if dims and isinstance(dims[-1], int):
            return Detected(dims[-1], f"traced: {logits} via {self.shapes.origin(logits)}")
        for node in self.graph.nodes:
            if node.op_type != "Gather" or len(node.inputs) < 2:
                continue
            table = self.graph.initializers.get(node.inputs[0])
            if node.inputs[1] == ids and ids in self.graph.inputs and table is not None and len(table.dims) == 2:
                return Detected(table.dims[0], f"embedding: {table.name} {list(table.dims)} gathered by {ids}")
        return None

    def dtype(self, name: str) -> str | None:
        """A value's element type as the graph declares it (or as its initializer has it)."""
        info = self.graph.declared(name)
        if info is not None and info.dtype:
            return info.dtype
        init = self.graph.initializers.get(name)
        return init.dtype if init is not None else None


def _show(dims) -> str:
    return "rank unknown" if dims is None else "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
