"""MatMulNBits nodes as a plain MatMul over fp32 weights expanded once, at load.

onnxruntime-web's WASM build has no low-bit GEMM kernel (MLAS's QNBit kernels are x86 and Arm
only), so its MatMulNBits takes the fallback path on every call: it dequantizes the whole
weight matrix into a fresh fp32 buffer (K x N x 4 bytes: 933 MB for Qwen2.5-1.5B's lm_head) and
then runs a float GEMM on it (contrib_ops/cpu/quantization/matmul_nbits.cc, ComputeBUnpacked).
Decoding one token re-expands every weight: about 10x slower than the fp32 file. Expanding
the weights once, at load, into the same fp32 values, and running the MatMul onnxruntime-web
does fast, is exact: the same ``(q - zero_point) * scale`` per weight in fp32, the same fp32
GEMM (docs/large-models.md). It costs 4 bytes per weight in the heap instead of about 0.6, so
heap/plan.py chooses which nodes to expand; the rest stay MatMulNBits.

A node is expanded when it is what the fallback computes plainly: 4 or 8 bits, no ``g_idx``,
uint8 zero points (or none: the middle of the range), K a multiple of ``block_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..onnx_info.model import GraphInfo, Node
from ..ops.proto import encode_node
from .graph_edit import NewTensor, Slice, Weight

OP = "MatMulNBits"
DOMAIN = "com.microsoft"
FLOAT, FLOAT16 = 1, 10   # TensorProto codes for Cast's "to"


@dataclass(frozen=True)
class NBits:
    """A MatMulNBits node and what expanding it takes."""

    node: Node
    k: int
    n: int
    bits: int
    block_size: int
    b: Weight
    scales: Weight
    zero_points: Weight | None
    why_not: str | None = None      # why it stays as it is (None: it can be expanded)

    @property
    def output(self) -> str:
        return self.node.outputs[0]

    @property
    def float16(self) -> bool:
        return self.scales.dtype == "float16"

    @property
    def expanded_bytes(self) -> int:
        return self.k * self.n * 4

    @property
    def stored_bytes(self) -> int:
        return self.b.nbytes + self.scales.nbytes + (self.zero_points.nbytes if self.zero_points else 0)

    @property
    def blocks(self) -> int:
        return self.k // self.block_size


def find(graph: GraphInfo, weights: dict[str, Weight]) -> list[NBits]:
    """Every MatMulNBits node of ``graph`` (subgraphs included) whose B and scales are
    initializers, with ``why_not`` set where it can't be expanded."""
    found = []
    for node in graph.flattened().nodes:
        if node.op_type != OP or node.domain != DOMAIN:
            continue
        ins = list(node.inputs) + [""] * (6 - len(node.inputs))
        b, scales, zps = weights.get(ins[1]), weights.get(ins[2]), weights.get(ins[3]) if ins[3] else None
        if b is None or scales is None or b.data is None or scales.data is None:
            continue   # computed weights: nothing to expand at load
        k, n = int(node.attrs.get("K", 0)), int(node.attrs.get("N", 0))
        bits, block = int(node.attrs.get("bits", 4)), int(node.attrs.get("block_size", 0))
        why = None
        if bits not in (4, 8):
            why = f"{bits}-bit weights"
        elif ins[4]:
            why = "a g_idx input (reordered blocks)"
        elif ins[3] and (zps is None or zps.dtype != "uint8" or zps.data is None):
            why = "zero points that are not a uint8 initializer"
        elif not block or k % block:
            why = f"K={k} is not a multiple of block_size {block}"
        elif scales.dtype not in ("float32", "float16"):
            why = f"{scales.dtype} scales"
        found.append(NBits(node, k, n, bits, block, b, scales, zps, why))
    return found


def _slice(s: Slice) -> dict:
    return {"file": s.file, "start": s.start, "end": s.end}


def expansion(nb: NBits, location: str) -> tuple[list[bytes], NewTensor, dict]:
    """(the nodes replacing ``nb``, the fp32 weight initializer they read, the spec the loader
    follows to make that weight: ``kind`` "nbits_to_float32", a [K, N] row-major fp32 matrix of
    ``(q - zero_point) * scale``)."""
    node, y = nb.node, nb.output
    a = node.inputs[0]
    bias = node.inputs[5] if len(node.inputs) > 5 and node.inputs[5] else ""
    w = f"{y}/onnxpipe_fp32_weight"
    name = node.name or y
    nodes: list[bytes] = []
    if nb.float16:   # the fallback computes in fp32 between an fp16 A and an fp16 result
        a32 = f"{y}/onnxpipe_a32"
        nodes.append(encode_node("Cast", [a], [a32], f"{name}/cast_a", to=FLOAT))
        a = a32
    out = f"{y}/onnxpipe_y32" if (nb.float16 or bias) else y
    nodes.append(encode_node("MatMul", [a, w], [out], f"{name}/matmul"))
    if bias:
        b32 = bias
        if nb.float16:
            b32 = f"{y}/onnxpipe_bias32"
            nodes.append(encode_node("Cast", [bias], [b32], f"{name}/cast_bias", to=FLOAT))
        with_bias = f"{y}/onnxpipe_biased" if nb.float16 else y
        nodes.append(encode_node("Add", [out, b32], [with_bias], f"{name}/bias"))
        out = with_bias
    if nb.float16:
        nodes.append(encode_node("Cast", [out], [y], f"{name}/cast_y", to=FLOAT16))
    spec = {"kind": "nbits_to_float32", "out": location, "k": nb.k, "n": nb.n, "bits": nb.bits,
            "block_size": nb.block_size, "b": _slice(nb.b.data), "scales": _slice(nb.scales.data),
            "scales_dtype": nb.scales.dtype,
            "zero_points": _slice(nb.zero_points.data) if nb.zero_points is not None else None}
    return nodes, NewTensor(w, "float32", (nb.k, nb.n), location, nb.expanded_bytes), spec
