"""Static dims of graph values, traced from what the graph fixes: initializer shapes, node
constants (a Reshape's target), op attributes. A small shape inference for the few ops a
decoder's projections and attention use; anything else is "unknown", never a guess.

``dims(name)`` is a tuple of ints (fixed) and None (symbolic or unknown), or None when even the
rank is unknown. ``origin(name)`` says where its last dim was fixed, for error messages and logs.
"""

from __future__ import annotations

from .model import GraphInfo, Node, TensorMeta

Dims = tuple  # of int | None

# ops whose first output has the shape of their first input
SAME_AS_INPUT = {
    "Cast", "CastLike", "Identity", "Relu", "Sigmoid", "Tanh", "Gelu", "FastGelu", "QuickGelu",
    "BiasGelu", "Neg", "Sqrt", "Reciprocal", "Erf", "Exp", "Softmax", "Dropout", "Clip", "Silu",
    "LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "RotaryEmbedding", "Abs", "Floor", "Ceil", "Round",
}
BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Where", "Max", "Min", "Equal", "And", "Or",
             "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
ATTENTION_OPS = {"GroupQueryAttention", "MultiHeadAttention", "Attention"}


def _branch_outputs(node: Node) -> list[list[str]]:
    """Output names of each subgraph attribute (If: then/else), position for position."""
    return [list(g.outputs) for g in node.attrs.values() if hasattr(g, "outputs")]


def _deps(node: Node) -> list[str]:
    return list(node.inputs) + [o for outs in _branch_outputs(node) for o in outs]


def _known(d) -> int | None:
    return d if isinstance(d, int) and d >= 0 else None


def broadcast(shapes: list) -> Dims | None:
    if any(s is None for s in shapes) or not shapes:
        return None
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        seen = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        fixed = [d for d in seen if d is not None and d != 1]
        out.append(fixed[0] if fixed else 1 if seen and all(d == 1 for d in seen) else None)
    return tuple(out)


def merge(a: Dims | None, b: Dims | None) -> Dims | None:
    """Two views of one value's dims: a fixed dim in either wins (``a``, the declared one, first)."""
    if a is None or b is None or len(a) != len(b):
        return a if a is not None else b
    return tuple(x if x is not None else y for x, y in zip(a, b))


class StaticShapes:
    def __init__(self, graph: GraphInfo):
        self.graph = graph
        self._dims: dict[str, Dims | None] = {}
        self._origin: dict[str, str] = {}

    # ---- queries ---------------------------------------------------------------------------

    def dims(self, name: str) -> Dims | None:
        if name not in self._dims:
            self._compute(name)
        return self._dims.get(name)

    def origin(self, name: str) -> str:
        self.dims(name)
        return self._origin.get(name, "")

    def constant(self, name: str) -> TensorMeta | None:
        """A node-held constant (Constant's ``value``), with its values when small."""
        node = self.graph.producer(name)
        if node is not None and node.op_type == "Constant":
            value = node.attrs.get("value")
            if isinstance(value, TensorMeta):
                return value
            ints = node.attrs.get("value_ints")
            if isinstance(ints, tuple):
                return TensorMeta(name, "int64", (len(ints),), values=ints)
            one = node.attrs.get("value_int")
            if isinstance(one, int):
                return TensorMeta(name, "int64", (), values=(one,))
        return None

    def values(self, name: str) -> tuple | None:
        const = self.constant(name)
        return const.values if const is not None else None

    # ---- the walk --------------------------------------------------------------------------

    def _compute(self, name: str) -> None:
        """Iterative (a deep decoder would overflow the stack recursively): a node is evaluated
        once every input of it has dims."""
        stack, open_ = [(name, False)], set()
        while stack:
            top, expanded = stack.pop()
            if top in self._dims:
                continue
            node = self.graph.producer(top)
            if expanded:
                open_.discard(top)
                self._settle(top, node)
                continue
            open_.add(top)   # inputs still open when met again would be a cycle: skipped
            stack.append((top, True))
            stack.extend((i, False) for i in (_deps(node) if node else ()) if i and i not in self._dims
                         and i not in open_)

    def _settle(self, name: str, node: Node | None) -> None:
        declared = self.graph.declared(name)
        fixed = tuple(_known(d) for d in declared.dims) if declared and declared.dims is not None else None
        init = self.graph.initializers.get(name)
        if init is not None:
            self._dims[name] = init.dims
            self._origin[name] = f"initializer {name} {list(init.dims)}"
            return
        inferred = None
        if node is not None:
            try:
                outs = self._infer(node)
            except (ArithmeticError, IndexError, TypeError, ValueError):
                outs = []   # inconsistent constants: say nothing rather than something wrong
            index = node.outputs.index(name)
            inferred = outs[index] if index < len(outs) else None
            for i, out in enumerate(node.outputs):   # siblings computed by the same rule
                if out and out != name and out not in self._dims and i < len(outs):
                    self._dims[out] = merge(self._declared(out), outs[i])
        self._dims[name] = merge(fixed, inferred)
        if fixed and fixed[-1] is not None:   # a rule's own origin (a weight, a constant) says more
            self._note(name, f"the graph's declared shape of {name}")

    def _declared(self, name: str) -> Dims | None:
        info = self.graph.declared(name)
        return tuple(_known(d) for d in info.dims) if info and info.dims is not None else None

    def _note(self, out: str, text: str) -> None:
        self._origin.setdefault(out, text)

    def _pass(self, node: Node, src: str) -> None:
        for out in node.outputs:
            if src in self._origin:
                self._note(out, self._origin[src])

    # ---- op rules --------------------------------------------------------------------------

    def _infer(self, node: Node) -> list:
        op, ins, a = node.op_type, node.inputs, node.attrs
        d = [self._dims.get(i) if i else None for i in ins]
        if op in SAME_AS_INPUT:
            self._pass(node, ins[0])
            return [d[0], None, None, d[0]] if op.startswith("Skip") else [d[0]]
        if op in BROADCAST:
            self._pass(node, ins[0])
            return [broadcast([x for x, i in zip(d, ins) if i])]
        if op == "Constant":
            const = self.constant(node.outputs[0])
            return [const.dims if const is not None else None]
        if op == "MatMul":
            return [self._matmul(node, d[0], d[1])]
        if op == "MatMulNBits":
            n = a.get("N")
            self._note(node.outputs[0], f"MatMulNBits {node.name} N={n}")
            return [d[0][:-1] + (n,) if d[0] is not None and isinstance(n, int) else None]
        if op == "Gemm":
            if d[0] is None or d[1] is None:
                return [None]
            self._note(node.outputs[0], f"Gemm {node.name} weight {ins[1]} {list(d[1])}")
            return [(d[0][1 if a.get("transA") else 0], d[1][0 if a.get("transB") else 1])]
        if op == "Gather":
            if d[0] is None or d[1] is None:
                return [None]
            axis = a.get("axis", 0) % len(d[0])
            self._note(node.outputs[0], self._origin.get(ins[0], ""))
            return [d[0][:axis] + d[1] + d[0][axis + 1:]]
        if op == "Reshape":
            return [self._reshape(node, d[0])]
        if op == "Transpose":
            if d[0] is None:
                return [None]
            perm = a.get("perm") or tuple(reversed(range(len(d[0]))))
            return [tuple(d[0][p] for p in perm)]
        if op == "Split":
            return self._split(node, d[0])
        if op == "Concat":
            return [self._concat(a.get("axis", 0), [x for x, i in zip(d, ins) if i])]
        if op in ("Unsqueeze", "Squeeze"):
            return [self._squeeze(node, d[0])]
        if op.startswith("Reduce"):
            return [self._reduce(node, d[0])]
        if op == "Shape":
            return [(len(d[0]),) if d[0] is not None else (None,)]
        if op in ("Range", "NonZero"):
            return [(None,)] if op == "Range" else [None]
        if op == "Expand":
            return [broadcast([d[0], self._as_shape(ins[1])])]
        if op == "Slice":
            return [tuple(None for _ in d[0]) if d[0] is not None else None]
        if op == "ConstantOfShape":
            return [self._as_shape(ins[0])]
        if op == "If":   # each output: what either branch fixes at that position
            outs = []
            for i, out in enumerate(node.outputs):
                views = [self._dims.get(b[i]) for b in _branch_outputs(node) if i < len(b)]
                merged = None
                for v in views:
                    merged = merge(merged, v)
                src = next((b[i] for b in _branch_outputs(node) if i < len(b) and b[i] in self._origin), None)
                if src:
                    self._note(out, self._origin[src])
                outs.append(merged)
            return outs
        if op in ATTENTION_OPS:
            from .attention import attention_outputs   # one module knows the attention ops
            return attention_outputs(self, node)
        return []

    def _as_shape(self, name: str):
        """A shape-valued input: its values when constant, else only its length (the rank)."""
        values = self.values(name)
        if values is not None:
            return tuple(v if v >= 0 else None for v in values)
        shape = self._dims.get(name)
        return (None,) * shape[0] if shape and len(shape) == 1 and shape[0] is not None else None

    def _reduce(self, node: Node, x):
        if x is None:
            return None
        axes = node.attrs.get("axes")
        if axes is None and len(node.inputs) > 1 and node.inputs[1]:
            axes = self.values(node.inputs[1])
        if axes is None:
            if len(node.inputs) > 1 and node.inputs[1]:
                return None   # axes computed at run time
            axes = range(len(x))
        norm = {ax % len(x) for ax in axes}
        if node.attrs.get("keepdims", 1):
            return tuple(1 if i in norm else v for i, v in enumerate(x))
        return tuple(v for i, v in enumerate(x) if i not in norm)

    def _matmul(self, node: Node, x, w):
        if x is None or w is None or len(w) < 2 or len(x) < 2:
            return None
        w_src = node.inputs[1]
        if w_src in self.graph.initializers:
            self._note(node.outputs[0], f"MatMul {node.name} weight {w_src} {list(w)}")
        elif w_src in self._origin:
            self._note(node.outputs[0], self._origin[w_src])
        lead = broadcast([x[:-2], w[:-2]]) if len(w) > 2 else x[:-2]
        return tuple(lead) + (x[-2], w[-1])

    def _reshape(self, node: Node, x):
        target = self.values(node.inputs[1])
        if target is None:
            return self._as_shape(node.inputs[1])
        self._note(node.outputs[0], f"Reshape {node.name} target {list(target)}")
        out = []
        for i, t in enumerate(target):
            if t == 0 and not node.attrs.get("allowzero"):
                out.append(x[i] if x is not None and i < len(x) else None)
            else:
                out.append(t if t > 0 else None)
        if out.count(None) == 1 and x is not None and None not in x:
            total = 1
            for v in x:
                total *= v
            rest = 1
            for v in out:
                rest *= v if v is not None else 1
            out[out.index(None)] = total // rest if rest and total % rest == 0 else None
        return tuple(out)

    def _split(self, node: Node, x) -> list:
        if x is None:
            return []
        axis = node.attrs.get("axis", 0) % len(x)
        sizes = node.attrs.get("split")
        if sizes is None and len(node.inputs) > 1 and node.inputs[1]:
            sizes = self.values(node.inputs[1])
        if sizes is None and x[axis] is not None and x[axis] % len(node.outputs) == 0:
            sizes = (x[axis] // len(node.outputs),) * len(node.outputs)
        if sizes is None:
            return [x[:axis] + (None,) + x[axis + 1:]] * len(node.outputs)
        for out, size in zip(node.outputs, sizes):
            if axis == len(x) - 1:
                self._note(out, f"Split {node.name} sizes {list(sizes)} of {self._origin.get(node.inputs[0], node.inputs[0])}")
        return [x[:axis] + (s,) + x[axis + 1:] for s in sizes]

    @staticmethod
    def _concat(axis: int, parts: list):
        known = [p for p in parts if p is not None]
        if not known or any(len(p) != len(known[0]) for p in known):
            return None
        rank = len(known[0])
        axis %= rank
        out = []
        for i in range(rank):
            if i == axis:
                sizes = [p[i] for p in parts] if len(known) == len(parts) else [None]
                out.append(sum(sizes) if None not in sizes else None)
            else:
                fixed = [p[i] for p in known if p[i] is not None]
                out.append(fixed[0] if fixed else None)
        return tuple(out)

    def _squeeze(self, node: Node, x):
        if x is None:
            return None
        axes = node.attrs.get("axes")
        if axes is None and len(node.inputs) > 1 and node.inputs[1]:
            axes = self.values(node.inputs[1])
        if node.op_type == "Unsqueeze":
            if axes is None:
                return None
            rank = len(x) + len(axes)
            norm = sorted(ax % rank for ax in axes)
            out, it = [], iter(x)
            for i in range(rank):
                out.append(1 if i in norm else next(it))
            return tuple(out)
        if axes is None:
            return tuple(v for v in x if v != 1) if None not in x else None
        norm = {ax % len(x) for ax in axes}
        return tuple(v for i, v in enumerate(x) if i not in norm)
