"""One graph as consecutive parts, each opened in an onnxruntime-web instance of its own.

Every onnxruntime-web instance has one 4 GiB WASM heap; a page can run several. A decoder whose
weights take more than one heap as fp32 (Qwen2.5-1.5B's q4 file expanded: 6.8 GiB) runs as parts
in consecutive instances: part k computes its share of the layers and hands the next part the
values it reads (the hidden state, and the attention mask or rotary tables computed once), the
KV cache of each layer stays with its part. Only values made from weights alone are made again
by a part that reads them (never handed from heap to heap on every step), so the parts together
compute exactly what the whole graph does (tests/py/heap/test_shards.py).

The split is found from the graph alone: its nodes in their own topological order, cut between
layers (where the fewest values are live) near equal shares of the weight bytes. Graphs whose
weights sit inside subgraphs (an Optimum merged decoder's If) are not split.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..onnx_info.model import GraphInfo, Node
from .graph_edit import Weight

HEAVY_BYTES = 1 << 20     # a weight this large is a layer's (small ones may be read by several parts)
# ops whose output has the element type of their first input
SAME_TYPE = {
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Erf", "Tanh",
    "Sigmoid", "Relu", "Softmax", "MatMul", "Gemm", "Transpose", "Reshape", "Unsqueeze", "Squeeze",
    "Concat", "Slice", "Gather", "GatherElements", "Expand", "Tile", "Split", "Identity", "ReduceMean",
    "ReduceSum", "ReduceMax", "Max", "Min", "Clip", "Cos", "Sin", "Flatten", "Range", "CumSum", "Trilu",
    "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "LayerNormalization",
    "RotaryEmbedding", "MatMulNBits", "FusedMatMul", "GroupQueryAttention", "Where", "ScatterND", "Mod",
}
INT64_OUT = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero"}
BOOL_OUT = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "IsNaN", "IsInf"}
CAST_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


@dataclass
class Part:
    """The nodes one instance runs, what it reads and what it hands on."""

    nodes: list[Node]
    inputs: list[str]                    # graph inputs and values from earlier parts
    outputs: list[str]                   # graph outputs and values later parts read
    handed: dict[str, str] = field(default_factory=dict)   # value from an earlier part -> its dtype
    weight_bytes: int = 0

    @property
    def keep(self) -> set[str]:
        """The first outputs of its nodes (how heap/graph_edit.py names nodes)."""
        return {n.outputs[0] for n in self.nodes}


class _Graph:
    def __init__(self, graph: GraphInfo, weights: dict[str, Weight]):
        self.graph, self.weights = graph, weights
        self.nodes = graph.nodes
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.outputs if o}

    def heavy_bytes(self, nodes) -> int:
        names = {v for i in nodes for v in self.nodes[i].inputs if v in self.weights}
        return sum(self.weights[v].nbytes for v in names if self.weights[v].nbytes >= HEAVY_BYTES)

    def dtype(self, value: str, depth: int = 0) -> str | None:
        """The element type of ``value``, followed back through the ops that keep it."""
        g = self.graph
        if value in self.weights:
            return self.weights[value].dtype
        declared = g.declared(value)
        if declared is not None and declared.dtype:
            return declared.dtype
        if value not in self.producer or depth > 200:
            return None
        node = self.nodes[self.producer[value]]
        if node.op_type == "Cast":
            return CAST_TYPES.get(node.attrs.get("to"))
        if node.op_type in INT64_OUT:
            return "int64"
        if node.op_type in BOOL_OUT:
            return "bool"
        if node.op_type == "Constant":
            t = node.attrs.get("value")
            return getattr(t, "dtype", None)
        if node.op_type == "ConstantOfShape":
            t = node.attrs.get("value")
            return getattr(t, "dtype", None) or "float32"
        if node.op_type == "Where":
            return self.dtype(node.inputs[1], depth + 1)
        if node.op_type in SAME_TYPE and node.inputs and node.inputs[0]:
            return self.dtype(node.inputs[0], depth + 1)
        return None


def split(graph: GraphInfo, weights: dict[str, Weight], parts: int, kv_outputs: list[str],
          heap_bytes: dict[str, int] | None = None) -> list[Part] | str:
    """``graph`` in ``parts`` consecutive parts, or why it can't be split. The nodes stay in the
    graph's own (topological) order, cut where fewest values are live across the cut (between
    layers: the hidden state, the mask, rotary tables and a few shape ints; inside a layer, many
    more), near equal shares of the weights (``heap_bytes``: what each takes in the heap, where
    that is not its stored size). ``kv_outputs`` (the KV cache outputs) must be spread over every
    part: each holds whole layers."""
    if parts < 2:
        return "one part asked for"
    if any(isinstance(v, GraphInfo) for n in graph.nodes for v in n.attrs.values()):
        return "its nodes hold subgraphs (a merged decoder's If)"
    g = _Graph(graph, weights)
    if not _topological(g):
        return "its nodes are not in topological order"
    n = len(g.nodes)
    if len([v for v in kv_outputs if v in g.producer]) < 2 * parts:
        return f"{len(kv_outputs)} KV outputs: fewer layers than parts"
    # heavy weight bytes read by nodes[:i], each weight counted where it is first read
    heap_bytes = heap_bytes or {}
    cumulative, seen, acc = [0], set(), 0
    for node in g.nodes:
        for v in node.inputs:
            if v in weights and v not in seen and weights[v].nbytes >= HEAVY_BYTES:
                seen.add(v)
                acc += heap_bytes.get(v, weights[v].nbytes)
        cumulative.append(acc)
    live = _live_counts(g)
    kv_at = sorted(g.producer[v] for v in kv_outputs if v in g.producer)
    makers = set(kv_at)
    kv_before = [0] * (n + 1)   # KV outputs made by nodes[:i]
    for i in range(n):
        kv_before[i + 1] = kv_before[i] + (i in makers)
    whole = [i for i in range(1, n) if kv_before[i] % 2 == 0 and 2 <= kv_before[i] <= len(kv_at) - 2]
    layer_bytes = acc / (len(kv_at) / 2)   # within a layer of the share: then where fewest values are live
    cuts, last = [], 0
    for j in range(1, parts):
        target = acc * j / parts
        # a cut between whole layers (both of a layer's KV outputs on one side), near the share
        near = [i for i in whole if i > last and kv_before[i] > kv_before[last]
                and abs(cumulative[i] - target) <= layer_bytes]
        if not near:
            return "its weights could not be spread over the parts"
        best = min(near, key=lambda i: (live[i], abs(cumulative[i] - target)))
        cuts.append(best)
        last = best
    bounds = [0] + cuts + [n]
    node_sets = [set(range(a, b)) for a, b in zip(bounds, bounds[1:])]
    for k, nodes in enumerate(node_sets):
        if not nodes & makers:
            return f"part {k + 1} would hold no layer's KV cache"
    return _parts(g, node_sets)


def _topological(g: _Graph) -> bool:
    return all(g.producer.get(v, -1) < i for i, node in enumerate(g.nodes) for v in node.inputs if v)


def _live_counts(g: _Graph) -> list[int]:
    """live[i]: values made by nodes[:i] and read by nodes[i:] (what a cut before node i hands on)."""
    last_use: dict[str, int] = {}
    for i, node in enumerate(g.nodes):
        for v in node.inputs:
            if v in g.producer:
                last_use[v] = i
    delta = [0] * (len(g.nodes) + 2)
    for v, end in last_use.items():
        start = g.producer[v] + 1
        if start <= end:
            delta[start] += 1
            delta[end + 1] -= 1
    live, running = [], 0
    for i in range(len(g.nodes) + 1):
        running += delta[i]
        live.append(running)
    return live


def _constant_nodes(g: _Graph) -> set[int]:
    """Nodes computed from weights alone (an Identity of a shared weight, a Cast of one)."""
    out: set[int] = set()
    for i, node in enumerate(g.nodes):
        if node.inputs and all(not v or v in g.weights or (v in g.producer and g.producer[v] in out)
                               for v in node.inputs) and node.op_type != "Constant":
            out.add(i)
        elif node.op_type == "Constant":
            out.add(i)
    return out


def _parts(g: _Graph, node_sets: list[set[int]]) -> list[Part] | str:
    # a value made from weights alone is made again by each part that reads it (a weight is
    # never handed from heap to heap on every step)
    constant = _constant_nodes(g)
    first = {i: k for k, s in enumerate(node_sets) for i in s}
    for k, nodes in enumerate(node_sets):
        todo = [v for i in list(nodes) for v in g.nodes[i].inputs]
        while todo:
            v = todo.pop()
            j = g.producer.get(v)
            if j is not None and j in constant and first[j] < k and j not in nodes:
                nodes.add(j)
                todo.extend(g.nodes[j].inputs)
    owner = {}
    for k, s in enumerate(node_sets):
        for i in s:
            owner.setdefault(i, k)
    needed_later: dict[int, set[str]] = {k: set() for k in range(len(node_sets))}
    for k, nodes in enumerate(node_sets):
        for i in nodes:
            for v in g.nodes[i].inputs:
                if v in g.producer and g.producer[v] not in nodes:
                    needed_later[owner[g.producer[v]]].add(v)
    out: list[Part] = []
    for k, nodes in enumerate(node_sets):
        ordered = [g.nodes[i] for i in sorted(nodes)]
        handed = {}
        for i in nodes:
            for v in g.nodes[i].inputs:
                if v in g.producer and g.producer[v] not in nodes:
                    dtype = g.dtype(v)
                    if dtype is None:
                        return f"the element type of {v!r}, which part {k + 1} reads from an earlier part, is unknown"
                    handed[v] = dtype
        graph_inputs = [name for name in g.graph.inputs if any(name in g.nodes[i].inputs for i in nodes)]
        made = {o for i in nodes for o in g.nodes[i].outputs}
        outputs = [o for o in g.graph.outputs if o in made] + sorted(needed_later[k] - set(g.graph.outputs))
        out.append(Part(ordered, graph_inputs + sorted(handed), outputs, handed, g.heavy_bytes(nodes)))
    return out
