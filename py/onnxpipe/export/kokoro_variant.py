"""Variants of Kokoro's dynamically quantized int8 ONNX file for onnxruntime-web's WASM backend.

The int8 export computes every MatMul, Conv and LSTM as onnxruntime's dynamic quantization
made them: ``DynamicQuantizeLinear`` on the activations, then ``MatMulInteger`` /
``ConvInteger`` / ``DynamicQuantizeLSTM`` and a rescale. In onnxruntime-web's WASM build its
``ConvInteger`` (uint8 x uint8) is slow, and convolutions are ~3/4 of Kokoro's time. Recipes:

- ``int8`` (the shipped one, the bundle's ``kokoro.wasm.onnx``): every ConvInteger becomes
  im2col (transpose, pad with the input's zero point, one strided Slice per kernel tap, Concat)
  + ``MatMulInteger`` with the same weights as int8 (``w - 128``, zero point ``z - 128``: the same
  integers), so the int32 sums are exactly ConvInteger's; onnxruntime runs uint8 x int8 GEMMs
  much faster. With graph optimizations off, the output is bit-identical to the int8 file's;
  with them on, onnxruntime fuses the rescales differently in the two graphs (float rounding).
- ``fp32`` / ``fp16``: every weight put back in float (``(q - zero_point) * scale``: the int8
  file's own values, nothing re-learned) and computed in fp32 with the plain MatMul / Conv /
  LSTM; stored as float32, or as float16 behind a ``Cast`` that onnxruntime folds at session
  creation. The fp32 one is the reference the others are compared with; neither is faster than
  the int8 file in WASM (docs/kokoro.md).

Float pattern rewrites (what onnxruntime's ``quantize_dynamic`` wrote, read back):

    DynamicQuantizeLinear(x) -> MatMulInteger(xq, Wq, xzp, wzp) -> Cast -> Mul(Mul(xs, ws))
        => MatMul(x, W)
    DynamicQuantizeLinear(x) -> ConvInteger(xq, Wq, xzp, wzp) [-> Add(quantized bias)] -> Cast
        -> Mul(Mul(xs, ws))                                  => Conv(x, W[, b]) (same attributes)
    DynamicQuantizeLSTM(X, W, R, B, ..., W_scale, W_zp, R_scale, R_zp)
        => LSTM(X, W^T, R^T, B, ...) (the quantized op stores W as [dirs, in, 4h])

The quantized bias of a Conv is ``round(b / (xs * ws))`` computed in the graph from the float
bias initializer, which is found by walking back to it (the int8 recipe keeps that integer
bias). The quantized embedding tables' ``DequantizeLinear`` stay as they are. CPython only.

    PYTHONPATH=py python -m onnxpipe.export.kokoro_variant INT8.onnx OUT.onnx [--weights int8|fp16|fp32]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

RECIPE_VERSION = 1
WEIGHTS = ("int8", "fp16", "fp32")   # recipes, the shipped one first


class _Graph:
    """Producer / consumer / initializer lookups over one onnx GraphProto."""

    def __init__(self, graph):
        from onnx import numpy_helper

        self.graph = graph
        self.init = {t.name: t for t in graph.initializer}
        self._arrays: dict = {}
        self._np = numpy_helper
        self.producer = {o: n for n in graph.node for o in n.output}
        self.consumers: dict[str, list] = defaultdict(list)
        for n in graph.node:
            for i in n.input:
                self.consumers[i].append(n)

    def array(self, name: str):
        if name not in self._arrays:
            self._arrays[name] = self._np.to_array(self.init[name])
        return self._arrays[name]

    def only_consumer(self, name: str, op: str):
        found = self.consumers.get(name, [])
        if len(found) != 1 or found[0].op_type != op:
            kinds = ", ".join(n.op_type for n in found) or "nothing"
            raise RuntimeError(f"{name}: expected one {op} consumer, found {kinds}")
        return found[0]

    def weight_scale(self, scales_mul) -> str:
        """The initializer of Mul(x_scale, w_scale) (the other input is the activation's scale)."""
        names = [i for i in scales_mul.input if i in self.init]
        if len(names) != 1:
            raise RuntimeError(f"{scales_mul.name}: expected one weight-scale initializer")
        return names[0]

    def float_source(self, name: str) -> str:
        """The float initializer a computed tensor (a quantized bias) was made from."""
        seen = [name]
        while seen:
            current = seen.pop()
            if current in self.init and self.init[current].data_type == 1:
                return current
            node = self.producer.get(current)
            if node is not None:
                seen.extend(reversed(node.input))   # the bias is the first input of its Div
        raise RuntimeError(f"{name}: no float initializer upstream")


def _dequantized(g: _Graph, weight: str, zero_point: str, scale: str, per_first_axis: bool = False):
    """``(q - zero_point) * scale``; scales broadcast over the last axis (a MatMul's columns) or,
    with ``per_first_axis``, over the first (an LSTM's directions)."""
    import numpy as np

    q = g.array(weight).astype(np.float32)
    zp, s = g.array(zero_point).astype(np.float32), g.array(scale).astype(np.float32)
    if per_first_axis:
        zp, s = zp.reshape(-1, *[1] * (q.ndim - 1)), s.reshape(-1, *[1] * (q.ndim - 1))
    return (q - zp) * s


def _scales_mul(g: _Graph, node):
    """The final Mul(cast, Mul(x_scale, w_scale)) of an integer MatMul / Conv: (mul, cast, bias add)."""
    after = g.consumers[node.output[0]]
    bias_add = None
    if len(after) == 1 and after[0].op_type == "Add":
        bias_add = after[0]
        after = g.consumers[bias_add.output[0]]
    cast = after[0] if len(after) == 1 and after[0].op_type == "Cast" else None
    if cast is None:
        raise RuntimeError(f"{node.name}: expected Cast after {node.op_type}")
    mul = g.only_consumer(cast.output[0], "Mul")
    other = next(i for i in mul.input if i != cast.output[0])
    return mul, g.producer[other], bias_add


def dequantize(model) -> dict:
    """Rewrite ``model`` (in place) to float compute; returns {new weight name: fp32 array}."""
    from onnx import helper

    g = _Graph(model.graph)
    weights: dict = {}
    replace: dict[int, object] = {}       # id(final node of a pattern) -> its float node
    for node in list(model.graph.node):
        if node.op_type in ("MatMulInteger", "ConvInteger"):
            quantize = g.producer[node.input[0]]
            if quantize.op_type != "DynamicQuantizeLinear":
                raise RuntimeError(f"{node.name}: input is not a DynamicQuantizeLinear")
            mul, scales, bias_add = _scales_mul(g, node)
            name = node.input[1] + "_float"
            w = _dequantized(g, node.input[1], node.input[3], g.weight_scale(scales))
            weights[name] = w
            inputs = [quantize.input[0], name]
            if bias_add is not None:
                quantized_bias = next(i for i in bias_add.input if i != node.output[0])
                inputs.append(g.float_source(quantized_bias))
            op = "MatMul" if node.op_type == "MatMulInteger" else "Conv"
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            replace[id(mul)] = helper.make_node(op, inputs, [mul.output[0]], name=node.name + "_float",
                                                **attrs)
        elif node.op_type == "DynamicQuantizeLSTM":
            x, w, r, b, lens, h0, c0, p, ws, wz, rs, rz = (list(node.input) + [""] * 12)[:12]
            names = []
            for src, zp, scale in ((w, wz, ws), (r, rz, rs)):
                deq = _dequantized(g, src, zp, scale, per_first_axis=True)   # [dirs, in, 4h]
                if deq.ndim != 3:
                    raise RuntimeError(f"{node.name}: unexpected weight rank {deq.ndim}")
                name = src + "_float"
                weights[name] = deq.transpose(0, 2, 1).copy()
                names.append(name)
            if g.array(ws).ndim != 1 or g.array(rs).ndim != 1:
                raise RuntimeError(f"{node.name}: expected per-direction scales")
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            replace[id(node)] = helper.make_node("LSTM", [x, names[0], names[1], b, lens, h0, c0, p],
                                                 list(node.output), name=node.name + "_float", **attrs)
    if not replace:
        raise RuntimeError("no dynamically quantized MatMul / Conv / LSTM found: not the int8 export?")
    _splice(model, {k: [v] for k, v in replace.items()})
    return weights


def _splice(model, replace: dict) -> None:
    """Put each list of nodes in ``replace`` where the node it is keyed by (its id) stood."""
    nodes = [m for n in model.graph.node for m in replace.get(id(n), [n])]
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def _im2col_nodes(g: _Graph, node, tag: str, inits: list) -> tuple[list, str]:
    """Nodes turning ConvInteger's quantized [1, C, L] input into the [1, L_out, k * C] matrix
    MatMulInteger multiplies: transpose, pad with the input's zero point (as ConvInteger pads),
    one strided slice per kernel tap, concatenated tap by tap. Returns (nodes, matrix name)."""
    import numpy as np
    from onnx import helper, numpy_helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    (k,) = g.init[node.input[1]].dims[2:]
    (stride,), (dilation,) = attrs.get("strides", [1]), attrs.get("dilations", [1])
    begin, end = attrs.get("pads", [0, 0])
    if attrs.get("group", 1) != 1 or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise RuntimeError(f"{node.name}: only group 1 and explicit pads are rewritten")

    made: set = set()

    def const(name, values):
        if name not in made:
            made.add(name)
            inits.append(numpy_helper.from_array(np.array(values, np.int64), f"{tag}_{name}"))
        return f"{tag}_{name}"

    nodes = [helper.make_node("Transpose", [node.input[0]], [f"{tag}_xt"], perm=[0, 2, 1])]
    x = f"{tag}_xt"
    if begin or end:
        nodes.append(helper.make_node("Pad", [x, const("pads", [0, begin, 0, 0, end, 0]), node.input[2]],
                                      [f"{tag}_xp"]))
        x = f"{tag}_xp"
    if k == 1 and stride == 1:
        return nodes, x
    span = dilation * (k - 1)
    taps = []
    for j in range(k):
        stop = j * dilation - span if j * dilation < span else np.iinfo(np.int64).max
        nodes.append(helper.make_node("Slice", [x, const(f"s{j}", [j * dilation]), const(f"e{j}", [stop]),
                                                const("axis", [1]), const("step", [stride])], [f"{tag}_tap{j}"]))
        taps.append(f"{tag}_tap{j}")
    nodes.append(helper.make_node("Concat", taps, [f"{tag}_col"], axis=2))
    return nodes, f"{tag}_col"


def conv_as_matmul(model) -> int:
    """Rewrite (in place) every ConvInteger as im2col + MatMulInteger with int8 weights; returns
    how many. The integers are the int8 file's own: uint8 weights w with zero point z become
    int8 w - 128 with zero point z - 128, so every product (w - z) * (x - x_zp) is unchanged and
    the int32 sums are exactly ConvInteger's. The activations stay uint8 (DynamicQuantizeLinear),
    so MatMulInteger runs as uint8 x int8, onnxruntime-web's fast integer GEMM."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    g = _Graph(model.graph)
    inits: list = []
    replace: dict[int, list] = {}
    for index, node in enumerate(list(model.graph.node)):
        if node.op_type != "ConvInteger":
            continue
        if g.init[node.input[1]].data_type != TensorProto.UINT8 or g.array(node.input[3]).size != 1:
            raise RuntimeError(f"{node.name}: expected uint8 weights with one zero point")
        mul, scales, bias_add = _scales_mul(g, node)
        tag = f"conv_mm{index}"
        nodes, col = _im2col_nodes(g, node, tag, inits)
        w = g.array(node.input[1]).astype(np.int16) - 128              # [out, in, k]
        matrix = w.transpose(2, 1, 0).reshape(-1, w.shape[0]).astype(np.int8)   # [k * in, out], tap-major
        inits.append(numpy_helper.from_array(matrix, f"{tag}_w"))
        inits.append(numpy_helper.from_array(np.array(int(g.array(node.input[3])) - 128, np.int8), f"{tag}_wz"))
        nodes.append(helper.make_node("MatMulInteger", [col, f"{tag}_w", node.input[2], f"{tag}_wz"], [f"{tag}_acc"]))
        acc = f"{tag}_acc"
        if bias_add is not None:
            reshaped = next(i for i in bias_add.input if i != node.output[0])
            bias = g.producer[reshaped].input[0] if g.producer[reshaped].op_type == "Reshape" else reshaped
            inits.append(numpy_helper.from_array(np.array([-1], np.int64), f"{tag}_flat"))
            nodes += [helper.make_node("Reshape", [bias, f"{tag}_flat"], [f"{tag}_bias"]),
                      helper.make_node("Add", [acc, f"{tag}_bias"], [f"{tag}_biased"])]
            acc = f"{tag}_biased"
        nodes += [helper.make_node("Cast", [acc], [f"{tag}_float"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"{tag}_float", scales.output[0]], [f"{tag}_scaled"]),
                  helper.make_node("Transpose", [f"{tag}_scaled"], [mul.output[0]], perm=[0, 2, 1])]
        replace[id(mul)] = nodes
    if not replace:
        raise RuntimeError("no ConvInteger found: not the int8 export?")
    _splice(model, replace)
    model.graph.initializer.extend(inits)
    return len(replace)


def _prune(model) -> None:
    """Drop nodes nothing needs (the quantization chains) and initializers nothing reads."""
    graph = model.graph
    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(list(graph.node)):
        if any(o in needed for o in node.output) or _has_subgraph(node):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del graph.node[:]
    graph.node.extend(keep)
    used = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(used)


def _has_subgraph(node) -> bool:
    return any(a.type in (5, 10) for a in node.attribute)   # GRAPH / GRAPHS: keep what they read


def make_variant(int8_path: str, out_path: str, weights: str = WEIGHTS[0]) -> dict:
    """Write the ``weights`` variant of ``int8_path``; returns counts for the builder's log."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if weights not in WEIGHTS:
        raise ValueError(f"weights: expected one of {', '.join(WEIGHTS)}, found {weights!r}")
    model = onnx.load(int8_path)
    graph = model.graph
    if weights == "int8":
        convs = conv_as_matmul(model)
        _prune(model)
        onnx.checker.check_model(model)
        onnx.save(model, out_path)
        return {"weights": convs, "params": 0, "ops": _op_counts(graph)}
    arrays = dequantize(model)
    casts = []
    for name, value in arrays.items():
        if weights == "fp16":
            stored = name + "_fp16"
            graph.initializer.append(numpy_helper.from_array(value.astype(np.float16), stored))
            casts.append(helper.make_node("Cast", [stored], [name], name=name + "_cast", to=TensorProto.FLOAT))
        else:
            graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), name))
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    _prune(model)
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
    return {"weights": len(arrays), "params": int(sum(v.size for v in arrays.values())), "ops": _op_counts(graph)}


def _op_counts(graph) -> dict:
    count: dict = {}
    for n in graph.node:
        count[n.op_type] = count.get(n.op_type, 0) + 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("int8_model")
    parser.add_argument("out")
    parser.add_argument("--weights", choices=WEIGHTS, default=WEIGHTS[0])
    args = parser.parse_args(argv)
    info = make_variant(args.int8_model, args.out, args.weights)
    what = ("convolutions as MatMulInteger" if args.weights == "int8"
            else f"weights ({info['params']} values) in {args.weights}")
    print(f"{args.out}: {info['weights']} {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
