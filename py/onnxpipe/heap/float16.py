"""fp16 MatMul weights widened to fp32 at load, as the engine would, but with no fp16 copy left.

onnxruntime's CPU kernels (WASM's included) have no fp16 MatMul: a session of an fp16 graph
casts each MatMul's input and weight to fp32 and its result back (InsertCastTransformer), the
weight's cast folded at load into an fp32 copy. Measured on Qwen2.5-0.5B's fp16 file, some fp16
originals stay in the heap beside their copies (2487 MiB against 2143 for the fp32 weights).
Doing the same in the graph (Cast the input, MatMul an fp32 weight made by the loader, Cast the
result) computes exactly that and leaves nothing behind.
"""

from __future__ import annotations

from ..onnx_info.model import GraphInfo
from ..ops.proto import encode_node
from .graph_edit import NewTensor, Weight

FLOAT, FLOAT16 = 1, 10


def find(graph: GraphInfo, weights: dict[str, Weight]) -> list:
    """(node, weight) of every plain MatMul whose B is a 2-D fp16 initializer."""
    out = []
    for node in graph.flattened().nodes:
        if node.op_type != "MatMul" or node.domain or len(node.inputs) != 2:
            continue
        w = weights.get(node.inputs[1])
        if w is not None and w.dtype == "float16" and len(w.dims) == 2 and w.data is not None:
            out.append((node, w))
    return out


def widening(node, weight: Weight, location: str) -> tuple[list[bytes], NewTensor, dict]:
    """(the nodes replacing ``node``, the fp32 weight they read, the loader's spec for it:
    ``kind`` "float16_to_float32", the same values widened)."""
    a, y = node.inputs[0], node.outputs[0]
    name = node.name or y
    w32, a32, y32 = f"{y}/onnxpipe_fp32_weight", f"{y}/onnxpipe_a32", f"{y}/onnxpipe_y32"
    nodes = [encode_node("Cast", [a], [a32], f"{name}/cast_a", to=FLOAT),
             encode_node("MatMul", [a32, w32], [y32], f"{name}/matmul"),
             encode_node("Cast", [y32], [y], f"{name}/cast_y", to=FLOAT16)]
    count = weight.dims[0] * weight.dims[1]
    spec = {"kind": "float16_to_float32", "out": location, "count": count,
            "data": {"file": weight.data.file, "start": weight.data.start, "end": weight.data.end}}
    return nodes, NewTensor(w32, "float32", weight.dims, location, count * 4), spec
