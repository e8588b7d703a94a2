"""What a model file becomes in onnxruntime-web's WASM heap, and the edit that gets it there.

``plan_file`` reads the file's graph (range reads, weights skipped), then:
- puts every weight outside the graph (heap/graph_edit.py): the heap then holds each weight
  once instead of the model's bytes, their parsed copy and the tensors made from them;
- expands MatMulNBits nodes to fp32 MatMuls (heap/nbits.py), as many as ``budget`` allows,
  largest first (the largest also sets the per-call buffer the ones kept need);
and reports the bytes: weights as they sit in the heap, and the largest per-call buffer.
``expand``: "auto" (within ``budget``), "all", or "none" (weights as stored).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..onnx_info.model import parse_model
from ..onnx_info.wire import Span
from . import float16, nbits, shards
from .graph_edit import CHUNK_BYTES, EditedModel, Slice, Subgraph, Weight, edit_model, weights_in

EXPAND_MODES = ("auto", "all", "none")


@dataclass
class HeapPlan:
    file: str
    edited: EditedModel
    materialize: list[dict] = field(default_factory=list)   # weights the loader makes (heap/nbits.py specs)
    expanded: list[str] = field(default_factory=list)        # MatMulNBits outputs now fp32 MatMuls
    kept: dict[str, str] = field(default_factory=dict)       # MatMulNBits output -> why it stays
    temp_bytes: int = 0      # the largest buffer a kept MatMulNBits allocates per call
    widened_bytes: int = 0   # fp16 MatMul weights the engine adds an fp32 copy of (and drops the fp16)
    part: Subgraph | None = None   # the part of the graph this plan opens (heap/shards.py), None: all

    @property
    def model(self) -> bytes:
        return self.edited.model

    @property
    def mounts(self) -> dict[str, Slice]:
        return self.edited.mounts

    @property
    def weight_bytes(self) -> int:
        return self.edited.weight_bytes

    @property
    def heap_bytes(self) -> int:
        """Weights as they sit in the heap after load, plus the largest per-call buffer of a
        kept MatMulNBits."""
        return self.weight_bytes + self.widened_bytes + self.temp_bytes

    def summary(self) -> dict:
        return {"weight_bytes": self.weight_bytes + self.widened_bytes, "temp_bytes": self.temp_bytes,
                "expanded": len(self.expanded), "kept": len(self.kept),
                "kept_why": sorted(set(self.kept.values())),
                "widened": sum(1 for spec in self.materialize if spec["kind"] == "float16_to_float32")}


def plan_file(source, model_file: str, expand: str = "auto", budget: int | None = None,
              chunk_bytes: int = CHUNK_BYTES) -> HeapPlan:
    """The heap plan of the model behind ``source`` (bundle path ``model_file``)."""
    _check_expand(expand)
    info = parse_model(Span(source, 0, source.size))
    return _plan(source, model_file, info, weights_in(source, model_file), expand, budget, chunk_bytes)


def plan_parts(source, model_file: str, parts: int, expand: str = "auto", budgets: list[int] | None = None,
               chunk_bytes: int = CHUNK_BYTES) -> list[HeapPlan] | str:
    """The model as ``parts`` consecutive graphs, one heap each (heap/shards.py), each with its
    own plan (``budgets[k]`` for part k); or why it can't be split. The graph's outputs mark the
    layers in the order their producers run, the last one (the logits) ending the graph."""
    _check_expand(expand)
    info = parse_model(Span(source, 0, source.size))
    weights = weights_in(source, model_file)
    g = info.graph
    producer = {o: i for i, n in enumerate(g.nodes) for o in n.outputs if o}
    ordered = sorted((o for o in g.outputs if o in producer), key=lambda o: producer[o])
    # balanced by what the weights take in the heap: MatMulNBits blocks as the fp32 they expand to
    expanded = {nb.b.name: nb.expanded_bytes for nb in nbits.find(g, weights) if nb.why_not is None}
    split = shards.split(g, weights, parts, ordered[:-1], expanded if expand != "none" else None)
    if isinstance(split, str):
        return split
    dtypes = {name: dtype for part in split for name, dtype in part.handed.items()}
    internal = frozenset(dtypes) - set(g.outputs)
    plans = []
    for k, part in enumerate(split):
        sub = Subgraph(frozenset(part.keep), tuple(part.inputs), tuple(part.outputs), dtypes, internal)
        plans.append(_plan(source, model_file, info, weights, expand, budgets[k] if budgets else None,
                           chunk_bytes, sub))
    return plans


def _check_expand(expand: str) -> None:
    if expand not in EXPAND_MODES:
        raise InputError(f'expand_weights: expected one of {", ".join(EXPAND_MODES)}, found {expand!r}')


def _plan(source, model_file: str, info, weights: dict[str, Weight], expand: str, budget: int | None,
          chunk_bytes: int, part: Subgraph | None = None) -> HeapPlan:
    nodes = info.graph.flattened().nodes
    if part is not None:
        nodes = [n for n in nodes if n.outputs and n.outputs[0] in part.keep]
        read = {v for n in nodes for v in n.inputs}
        weights = {k: w for k, w in weights.items() if k in read}
    found = [nb for nb in nbits.find(info.graph, weights) if part is None or nb.output in part.keep]
    uses: dict[str, int] = {}
    for node in nodes:
        for name in set(node.inputs):
            uses[name] = uses.get(name, 0) + 1
    candidates = [nb for nb in found if nb.why_not is None]
    # fp16 MatMul weights: widened here unless "none" (then the engine widens them itself)
    halves = [] if expand == "none" else [(n, w) for n, w in float16.find(info.graph, weights)
                                          if part is None or n.outputs[0] in part.keep]
    widened = sum(weights[name].nbytes for name in _float16_matmul_weights(nodes, weights))
    chosen = _choose(candidates, weights, found, expand, None if budget is None else budget - widened)
    replace, add, drop, specs = {}, [], set(), []
    # (node output, its replacement nodes, the weight they read, its spec, the weights it replaces)
    made = [(nb.output, *nbits.expansion(nb, f"onnxpipe-weights/expanded-{i}.bin"), [nb.b, nb.scales, nb.zero_points])
            for i, nb in enumerate(chosen)]
    made += [(node.outputs[0], *float16.widening(node, w, f"onnxpipe-weights/widened-{i}.bin"), [w])
             for i, (node, w) in enumerate(halves)]
    for output, encoded, tensor, spec, read in made:
        replace[output] = encoded
        add.append(tensor)
        specs.append(spec)
        for w in read:
            if w is not None and uses.get(w.name, 0) <= 1:
                drop.add(w.name)
    edited = edit_model(source, model_file, replace, add, drop, chunk_bytes, part)
    chosen_out = {nb.output for nb in chosen}
    kept = {nb.output: (nb.why_not or ("the heap budget" if expand == "auto" else "expand_weights none"))
            for nb in found if nb.output not in chosen_out}
    temp = max((nb.expanded_bytes for nb in found if nb.output not in chosen_out), default=0)
    # what the engine widens itself (fp16 MatMul weights left as they are)
    widened_left = sum(weights[name].nbytes for name in _float16_matmul_weights(nodes, weights)
                       if name not in {w.name for _, w in halves})
    return HeapPlan(model_file, edited, specs, [nb.output for nb in chosen], kept, temp, widened_left, part)


def _float16_matmul_weights(nodes, weights: dict[str, Weight]) -> set[str]:
    """fp16 initializers a MatMul or Gemm reads: onnxruntime's CPU kernels compute them in
    fp32, from an fp32 copy the session makes at load."""
    return {n.inputs[1] for n in nodes
            if n.op_type in ("MatMul", "Gemm") and not n.domain and len(n.inputs) > 1
            and n.inputs[1] in weights and weights[n.inputs[1]].dtype == "float16"}


def _choose(candidates, weights, found, expand: str, budget: int | None) -> list:
    if expand == "none":
        return []
    if expand == "all" or budget is None:
        return list(candidates)
    stored = sum(w.nbytes for w in weights.values())
    chosen: list = []
    kept = sorted(found, key=lambda nb: -nb.expanded_bytes)
    total = stored + (kept[0].expanded_bytes if kept else 0)
    for nb in sorted(candidates, key=lambda c: -c.expanded_bytes):
        rest = [k for k in kept if k is not nb]
        temp_after = rest[0].expanded_bytes if rest else 0
        temp_now = kept[0].expanded_bytes if kept else 0
        after = total + nb.expanded_bytes - nb.stored_bytes - temp_now + temp_after
        if after <= budget:
            chosen.append(nb)
            kept, total = rest, after
    return chosen
