"""What attention ops say about their KV cache: head count from attributes, head size from the
width of their key (or packed QKV) input.

- com.microsoft GroupQueryAttention: ``kv_num_heads``; head size = key width / kv_num_heads,
  or packed QKV width / (num_heads + 2 kv_num_heads) when key is omitted.
- com.microsoft MultiHeadAttention: ``num_heads`` (K and V have as many heads as Q); head size
  from a 4-D key's last dim, or key width / num_heads.
- ONNX Attention (opset 23): ``kv_num_heads``; head size from a 4-D key's last dim, or key
  width / kv_num_heads.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Node

# op -> (input index of past_key, input index of past_value)
PAST_INPUTS = {("GroupQueryAttention", "com.microsoft"): (3, 4),
               ("MultiHeadAttention", "com.microsoft"): (6, 7),
               ("Attention", ""): (4, 5), ("Attention", "ai.onnx"): (4, 5)}


@dataclass(frozen=True)
class KVLayout:
    heads: int | None
    head_size: int | None
    how: str              # what fixed them, in words


def _input(node: Node, i: int) -> str:
    return node.inputs[i] if i < len(node.inputs) else ""


def _width(shapes, name: str) -> tuple[int | None, str]:
    dims = shapes.dims(name) if name else None
    if not dims:
        return None, ""
    origin = shapes.origin(name)
    return dims[-1], f" ({origin})" if origin else ""


def _div(total: int | None, parts: int | None) -> int | None:
    return total // parts if total and parts and total % parts == 0 else None


def kv_layout(shapes, node: Node) -> KVLayout | None:
    """Heads and head size of the KV cache ``node`` reads, or None for other ops."""
    key = (node.op_type, node.domain)
    if key not in PAST_INPUTS:
        return None
    a = node.attrs
    label = f"{node.op_type} {node.name or node.outputs[0]}"
    if node.op_type == "GroupQueryAttention":
        heads, q_heads = a.get("kv_num_heads"), a.get("num_heads")
        k = _input(node, 1)
        if k:
            width, why = _width(shapes, k)
            size = _div(width, heads)
            how = f"{label}: kv_num_heads={heads}; head size = key width {width}{why} / {heads}"
        else:
            width, why = _width(shapes, _input(node, 0))
            size = _div(width, (q_heads or 0) + 2 * (heads or 0))
            how = (f"{label}: kv_num_heads={heads}; head size = packed QKV width {width}{why} / "
                   f"(num_heads {q_heads} + 2 x {heads})")
        return KVLayout(heads, size, how)
    heads = a.get("num_heads") if node.op_type == "MultiHeadAttention" else a.get("kv_num_heads")
    k = _input(node, 1)
    k_dims = shapes.dims(k) if k else None
    if k_dims is not None and len(k_dims) == 4:
        return KVLayout(heads if heads else k_dims[1], k_dims[3],
                        f"{label}: heads={heads or k_dims[1]}; head size = its 4-D key's last dim")
    if node.op_type == "MultiHeadAttention" and not k:
        q = shapes.dims(_input(node, 0))
        if q is not None and len(q) == 5:   # packed [batch, seq, heads, 3, head]
            return KVLayout(heads, q[4], f"{label}: num_heads={heads}; head size = packed QKV's last dim")
    width, why = _width(shapes, k)
    return KVLayout(heads, _div(width, heads), f"{label}: heads={heads}; head size = key width {width}{why} / {heads}")


def attention_outputs(shapes, node: Node) -> list:
    """Output dims: [batch, seq, q_heads x head] then present key/value [batch, heads, ?, head]."""
    layout = kv_layout(shapes, node)
    if layout is None:
        return []
    q = shapes.dims(_input(node, 0))
    batch = q[0] if q else None
    present = (batch, layout.heads, None, layout.head_size)
    q_heads = node.attrs.get("num_heads") or node.attrs.get("q_num_heads")
    hidden = q_heads * layout.head_size if q_heads and layout.head_size else None
    seq = q[1] if q and len(q) >= 3 else None
    return [(batch, seq, hidden), present, present]
