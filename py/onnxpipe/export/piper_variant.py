"""Variants of a Piper (VITS) voice file for onnxruntime-web's WASM backend, to measure and compare.

Piper's time goes to 1-D convolutions: the decoder's (HiFi-GAN: conv_pre, three upsampling
stages of 128/64/32-channel residual convolutions with kernels 3/5/7, conv_post) and the flow's
(k = 5, 384 x 192). onnxruntime-web computes fp32 convolutions at ~12 G multiply-adds/s per
thread and uint8 x int8 ``MatMulInteger`` at ~33 G (docs/kokoro.md). Recipes:

- ``int8-dec`` / ``int8-dec-flow`` / ``int8-all``: the decoder's residual and pre-convolutions
  (and the flow's, and every group-1 Conv) computed in int8: weights quantized per output
  channel, symmetric (``round(w / s)``, ``s = max|w| / 127``); activations quantized per tensor
  at run time (``DynamicQuantizeLinear``); each convolution written as im2col (the recipe of
  kokoro_variant: transpose, pad with the activation's zero point, one strided Slice per tap,
  Concat) + ``MatMulInteger`` + a float rescale and bias. conv_post (the waveform itself) and
  the upsampling ConvTranspose stay fp32.
- ``fp16``: every float weight of 1,000+ values stored as float16 behind a ``Cast`` that
  onnxruntime folds at session creation: half the bytes to download, the same fp32 compute.
- ``optimized``: the graph as onnxruntime's basic (portable) optimizations leave it: constants
  folded, shape arithmetic precomputed, nothing provider-specific.

docs/piper-variants.md says which is faster and faithful, measured in the browser. CPython only.

    PYTHONPATH=py python -m onnxpipe.export.piper_variant VOICE.onnx OUT.onnx --recipe int8-dec
"""

from __future__ import annotations

import argparse
import sys

RECIPE_VERSION = 1
RECIPES = ("int8-dec", "int8-dec-flow", "int8-wide-flow", "int8-all", "fp16", "optimized")
# which group-1 Convs each int8 recipe computes in int8: by the first part of the node's name
# (None: any), and the fewest input channels (the decoder's last, 32-channel stage runs at the
# audio rate: "wide" keeps it in fp32)
INT8_SCOPES = {"int8-dec": (("dec",), 0), "int8-dec-flow": (("dec", "flow"), 0),
               "int8-wide-flow": (("dec", "flow"), 64), "int8-all": (None, 0)}
MIN_FP16_VALUES = 1000


def _scope(node) -> str:
    parts = node.name.strip("/").split("/")
    return parts[0] if parts else ""


def _conv_post(model) -> str | None:
    """The decoder's last Conv (one output channel: the waveform), kept in fp32."""
    last = None
    for node in model.graph.node:
        if node.op_type == "Conv" and _scope(node) == "dec":
            last = node
    return last.name if last is not None else None


def quantize_convs(model, scopes, min_channels: int = 0) -> int:
    """Rewrite (in place) the group-1 1-D Convs under ``scopes`` (None: all) with at least
    ``min_channels`` input channels, but conv_post, as dynamic-int8 im2col + MatMulInteger;
    returns how many."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from .kokoro_variant import _Graph, _im2col_nodes, _splice

    g = _Graph(model.graph)
    keep = _conv_post(model)
    inits: list = []
    replace: dict[int, list] = {}
    for index, node in enumerate(list(model.graph.node)):
        if node.op_type != "Conv" or node.name == keep or (scopes is not None and _scope(node) not in scopes):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("group", 1) != 1 or node.input[1] not in g.init or len(g.init[node.input[1]].dims) != 3:
            continue
        if g.init[node.input[1]].dims[1] < min_channels:
            continue
        if len(node.input) > 2 and node.input[2] and node.input[2] not in g.init:
            raise RuntimeError(f"{node.name}: its bias is computed, expected an initializer")
        tag = f"conv_q{index}"
        w = g.array(node.input[1]).astype(np.float32)                       # [out, in, k]
        scale = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(axis=1), 1e-12) / 127.0
        q = np.clip(np.round(w / scale[:, None, None]), -127, 127).astype(np.int8)
        matrix = q.transpose(2, 1, 0).reshape(-1, w.shape[0])               # [k * in, out], tap-major
        inits.append(numpy_helper.from_array(np.ascontiguousarray(matrix), f"{tag}_w"))
        inits.append(numpy_helper.from_array(scale.astype(np.float32), f"{tag}_ws"))
        nodes = [helper.make_node("DynamicQuantizeLinear", [node.input[0]], [f"{tag}_xq", f"{tag}_xs", f"{tag}_xz"])]
        fake = helper.make_node("ConvInteger", [f"{tag}_xq", node.input[1], f"{tag}_xz"], [f"{tag}_unused"],
                                name=node.name, **attrs)
        im2col, col = _im2col_nodes(g, fake, tag, inits)
        nodes += im2col
        nodes += [helper.make_node("MatMulInteger", [col, f"{tag}_w", f"{tag}_xz"], [f"{tag}_acc"]),
                  helper.make_node("Cast", [f"{tag}_acc"], [f"{tag}_float"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"{tag}_xs", f"{tag}_ws"], [f"{tag}_s"]),
                  helper.make_node("Mul", [f"{tag}_float", f"{tag}_s"], [f"{tag}_scaled"])]
        out = f"{tag}_scaled"
        if len(node.input) > 2 and node.input[2]:
            nodes.append(helper.make_node("Add", [out, node.input[2]], [f"{tag}_biased"]))
            out = f"{tag}_biased"
        nodes.append(helper.make_node("Transpose", [out], [node.output[0]], perm=[0, 2, 1]))
        replace[id(node)] = nodes
    if not replace:
        raise RuntimeError("no group-1 Conv found to quantize: not a Piper voice?")
    _splice(model, replace)
    model.graph.initializer.extend(inits)
    return len(replace)


def store_fp16(model) -> int:
    """Every float initializer of MIN_FP16_VALUES+ values stored as float16 behind a Cast."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    casts, kept = [], []
    for t in graph.initializer:
        if t.data_type == TensorProto.FLOAT and int(np.prod(t.dims)) >= MIN_FP16_VALUES:
            value = numpy_helper.to_array(t)
            kept.append(numpy_helper.from_array(value.astype(np.float16), t.name + "_fp16"))
            casts.append(helper.make_node("Cast", [t.name + "_fp16"], [t.name], name=t.name + "_cast",
                                          to=TensorProto.FLOAT))
        else:
            kept.append(t)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return len(casts)


def optimized(src: str, out_path: str) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = out_path
    ort.InferenceSession(src, options, providers=["CPUExecutionProvider"])


def make_variant(src: str, out_path: str, recipe: str) -> dict:
    """Write the ``recipe`` variant of the voice file ``src``; returns counts for the log."""
    import onnx

    if recipe not in RECIPES:
        raise ValueError(f"recipe: expected one of {', '.join(RECIPES)}, found {recipe!r}")
    if recipe == "optimized":
        optimized(src, out_path)
        return {"recipe": recipe, "nodes": len(onnx.load(out_path).graph.node)}
    model = onnx.load(src)
    if recipe == "fp16":
        count = store_fp16(model)
    else:
        from .kokoro_variant import _prune

        count = quantize_convs(model, *INT8_SCOPES[recipe])
        _prune(model)
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
    return {"recipe": recipe, "rewritten": count, "nodes": len(model.graph.node)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("voice")
    parser.add_argument("out")
    parser.add_argument("--recipe", choices=RECIPES, default=RECIPES[0])
    args = parser.parse_args(argv)
    print(f"{args.out}: {make_variant(args.voice, args.out, args.recipe)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
