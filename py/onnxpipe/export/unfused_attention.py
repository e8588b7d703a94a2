"""GroupQueryAttention spelled out in standard ops, for onnxruntime-web's WASM backend.

onnxruntime-web 1.30's WASM GroupQueryAttention is slow on a several-token run over a long past:
one SmolLM2-135M layer (9 query heads, 3 KV heads, head size 64, 1 thread, in Node) takes 29.5 ms
for 15 new tokens after 800 cached ones, where the same attention as two batched MatMuls and a
Softmax takes 1.8 ms (8.0 vs 0.5 ms after 200; one new token after 800: 1.1 vs 0.3 ms). In the
voice page that kernel is most of the first token's time once the conversation has grown
(docs/voice.md). ``unfuse`` rewrites every GroupQueryAttention node of a graph into:

  split the packed QKV -> heads -> rotary (non-interleaved, from the graph's cos/sin caches at
  positions seqlens_k + 1 - S + i) -> present = Concat(past, new) -> the query heads of one KV
  head stacked as rows -> MatMul with the keys -> + causal mask (key j is seen by new token i
  when j <= its position) -> Softmax -> MatMul with the values -> back to [B, S, heads x size].

The result is GroupQueryAttention's for a *separate, growing* past whose rows all hold the same
number of positions (batch 1, beams, prompt-lookup drafts: what the browser runs). It is not for
a shared max-length buffer (the present would not be the bound buffer) nor for right-padded
rows of different lengths: pipeline.json maps it to the ``wasm`` provider only, whose KV cache is
always separate (``state/kv_cache.py``). Nodes using what the rewrite does not spell out (local
windows, softcap, interleaved rotary, position_ids, attention_bias, head_sink, a rotary
dimension other than the head size) are refused with the node's name, never left half-done.

The weights are untouched: the rewritten graph can point at the source's external data file,
so a bundle ships one more small graph, not another copy of the weights.

    PYTHONPATH=py python -m onnxpipe.export.unfused_attention IN.onnx OUT.onnx
"""

from __future__ import annotations

import argparse
import math
import os
import sys

# Bump when the rewrite changes the graphs it writes.
RECIPE_VERSION = 1
MS_DOMAIN = "com.microsoft"
OP = "GroupQueryAttention"
# inputs past the rotary caches (position_ids, attention_bias, head_sink) are not spelled out
MAX_INPUTS = 9


class UnfuseError(ValueError):
    """A GroupQueryAttention node the rewrite does not cover."""


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _check(node, attrs: dict, initializers: dict) -> tuple[int, int, float]:
    """(num_heads, kv_num_heads, scale) of a node the rewrite covers, else UnfuseError."""
    name = node.name or node.output[0]
    problems = []
    if attrs.get("local_window_size", -1) != -1:
        problems.append(f"local_window_size {attrs['local_window_size']} (a sliding window)")
    if attrs.get("softcap", 0.0) != 0.0:
        problems.append(f"softcap {attrs['softcap']}")
    if attrs.get("rotary_interleaved", 0) != 0:
        problems.append("rotary_interleaved 1")
    if attrs.get("smooth_softmax", 0) != 0:
        problems.append("smooth_softmax 1")
    if any(i for i in node.input[MAX_INPUTS:]):
        problems.append("position_ids / attention_bias / head_sink inputs")
    if len(node.input) < 7 or not node.input[3] or not node.input[4]:
        problems.append("no past key/value inputs")
    rotary = attrs.get("do_rotary", 0)
    if rotary:
        for cache in node.input[7:9]:
            if cache not in initializers:
                problems.append(f"rotary cache {cache!r} is not an initializer")
    if problems:
        raise UnfuseError(f"{OP} node {name!r}: not rewritten because of " + ", ".join(problems))
    return int(attrs["num_heads"]), int(attrs["kv_num_heads"]), float(attrs.get("scale", 0.0))


class _Graph:
    """Nodes and constants being added, with unique names."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.nodes = []
        self.initializers = []
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}/{hint}_{self.count}"

    def const(self, hint: str, values, dtype) -> str:
        import numpy as np
        from onnx import numpy_helper

        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str, outputs: list[str] | None = None, **attrs) -> str:
        from onnx import helper

        outputs = outputs or [self.name(hint)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=self.name(hint + "_node"), **attrs))
        return outputs[0]


def _shared(g: _Graph, query: str, seqlens: str, cos: str | None, sin: str | None, groups: int):
    """Per (query shape, seqlens, caches): rotary cos/sin at the new tokens' positions
    [B, 1, S, half] and the additive causal mask [B, 1, G x S, T] (T = positions after the run)."""
    import numpy as np

    one = g.const("one", [1], np.int64)
    zero = g.const("zero", 0, np.int64)
    step = g.const("step", 1, np.int64)
    seq = g.op("Shape", [query], "new_tokens", start=1, end=2)                      # [1]: S
    seq_scalar = g.op("Squeeze", [seq], "new_tokens_scalar")
    flat = g.op("Reshape", [g.op("Cast", [seqlens], "seqlens64", to=7), g.const("flat", [-1], np.int64)], "seqlens_flat")
    length = g.op("Add", [flat, one], "length")                                     # [B] ([B, 1] seen too)
    past = g.op("Sub", [length, seq], "past_length")                                # [B]
    new = g.op("Range", [zero, seq_scalar, step], "new_index")                      # [S]
    axes0, axes1 = g.const("axis0", [0], np.int64), g.const("axis1", [1], np.int64)
    positions = g.op("Add", [g.op("Unsqueeze", [past, axes1], "past_col"),
                             g.op("Unsqueeze", [new, axes0], "new_row")], "positions")   # [B, S]
    total = g.op("ReduceMax", [length], "total", keepdims=0)                        # T (rows equal)
    keys = g.op("Range", [zero, total, step], "key_index")                          # [T]
    axes2 = g.const("axis2", [2], np.int64)
    seen = g.op("LessOrEqual", [keys, g.op("Unsqueeze", [positions, axes2], "positions_col")], "seen")  # [B,S,T]
    mask = g.op("Where", [seen, g.const("open", 0.0, np.float32), g.const("shut", -np.inf, np.float32)], "mask")
    mask = g.op("Unsqueeze", [mask, axes1], "mask_heads")                           # [B, 1, S, T]
    if groups > 1:                                                                  # rows g*S + s
        mask = g.op("Tile", [mask, g.const("groups", [1, 1, groups, 1], np.int64)], "mask_groups")
    rotary = None
    if cos is not None:
        rotary = tuple(g.op("Unsqueeze", [g.op("Gather", [cache, positions], "at_" + hint), axes1], hint)
                       for cache, hint in ((cos, "cos"), (sin, "sin")))                # [B, 1, S, half]
    return rotary, mask


def _rotate(g: _Graph, x: str, rotary: tuple[str, str], hint: str) -> str:
    """Non-interleaved rotary embedding of x [B, H, S, D] (the two halves of D rotated)."""
    cos, sin = rotary
    first, second = g.name(hint + "_x1"), g.name(hint + "_x2")
    g.op("Split", [x], hint + "_halves", outputs=[first, second], axis=3, num_outputs=2)
    r1 = g.op("Sub", [g.op("Mul", [first, cos], hint + "_c1"), g.op("Mul", [second, sin], hint + "_s2")], hint + "_r1")
    r2 = g.op("Add", [g.op("Mul", [second, cos], hint + "_c2"), g.op("Mul", [first, sin], hint + "_s1")], hint + "_r2")
    return g.op("Concat", [r1, r2], hint + "_rotated", axis=3)


def _heads(g: _Graph, x: str, heads: int, size: int, hint: str) -> str:
    """[B, S, heads x size] -> [B, heads, S, size]."""
    import numpy as np

    shaped = g.op("Reshape", [x, g.const(hint + "_shape", [0, 0, heads, size], np.int64)], hint + "_split")
    return g.op("Transpose", [shaped], hint + "_heads", perm=[0, 2, 1, 3])


def _rewrite(g: _Graph, node, heads: int, kv_heads: int, scale: float, size: int, shared) -> None:
    import numpy as np

    rotary, mask = shared
    query, key, value = node.input[0], node.input[1], node.input[2]
    past_key, past_value = node.input[3], node.input[4]
    if not key:   # packed QKV
        key, value = g.name("k"), g.name("v")
        packed_q = g.name("q")
        g.op("Split", [query, g.const("qkv_sizes", [heads * size, kv_heads * size, kv_heads * size], np.int64)],
             "qkv", outputs=[packed_q, key, value], axis=2)
        query = packed_q
    q = _heads(g, query, heads, size, "q")
    k = _heads(g, key, kv_heads, size, "k")
    v = _heads(g, value, kv_heads, size, "v")
    if rotary is not None:
        q, k = _rotate(g, q, rotary, "q"), _rotate(g, k, rotary, "k")
    q = g.op("Mul", [q, g.const("scale", scale or 1.0 / math.sqrt(size), np.float32)], "q_scaled")
    outputs = list(node.output) + [""] * (3 - len(node.output))
    present_key = g.op("Concat", [past_key, k], "present_key", outputs=[outputs[1] or g.name("present_key")], axis=2)
    present_value = g.op("Concat", [past_value, v], "present_value",
                         outputs=[outputs[2] or g.name("present_value")], axis=2)
    # the query heads of KV head h are heads h*G .. h*G+G-1: stacked as G x S rows of KV head h
    rows = g.op("Reshape", [q, g.const("rows", [0, kv_heads, -1, size], np.int64)], "q_rows")
    scores = g.op("MatMul", [rows, g.op("Transpose", [present_key], "keys_t", perm=[0, 1, 3, 2])], "scores")
    probs = g.op("Softmax", [g.op("Add", [scores, mask], "masked")], "probs", axis=-1)
    context = g.op("MatMul", [probs, present_value], "context")                     # [B, KV, G*S, D]
    context = g.op("Reshape", [context, g.const("per_head", [0, heads, -1, size], np.int64)], "context_heads")
    context = g.op("Transpose", [context], "context_tokens", perm=[0, 2, 1, 3])     # [B, S, H, D]
    g.op("Reshape", [context, g.const("out_shape", [0, 0, heads * size], np.int64)], "out", outputs=[outputs[0]])


def unfuse(model):
    """Rewrite ``model``'s GroupQueryAttention nodes in place (see the module docstring); returns
    how many were rewritten. Raises UnfuseError (naming the node) on one it does not cover."""
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    targets = [n for n in graph.node if n.op_type == OP and n.domain == MS_DOMAIN]
    if not targets:
        return 0
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 18:
        raise UnfuseError(f"the graph's default opset is {opset}; the rewrite needs 18 or later "
                          "(Split's num_outputs)")
    rewritten: dict[str, list] = {}
    shared_parts: dict[tuple, tuple] = {}
    extra_initializers = []
    for index, node in enumerate(targets):
        attrs = _attrs(node)
        heads, kv_heads, scale = _check(node, attrs, initializers)
        if heads % kv_heads:
            raise UnfuseError(f"{OP} node {node.name!r}: num_heads {heads} is not a multiple of "
                              f"kv_num_heads {kv_heads}")
        cos = sin = None
        size = 0
        if attrs.get("do_rotary", 0):
            cos, sin = node.input[7], node.input[8]
            size = 2 * int(initializers[cos].dims[1])
        past = next((i for i in graph.input if i.name == node.input[3]), None)
        if past is not None:
            declared = past.type.tensor_type.shape.dim[3]
            if declared.HasField("dim_value"):
                if size and declared.dim_value != size:
                    raise UnfuseError(f"{OP} node {node.name!r}: rotary covers {size} of the head size "
                                      f"{declared.dim_value}; partial rotary is not spelled out")
                size = declared.dim_value
        if not size:
            raise UnfuseError(f"{OP} node {node.name!r}: the head size is not declared on {node.input[3]!r}")
        g = _Graph(f"/unfused/{node.name or index}")
        key = (node.input[5], cos, sin, heads // kv_heads, node.input[1] == "")
        if key not in shared_parts:
            sg = _Graph(f"/unfused/shared{len(shared_parts)}")
            # the new tokens' count: from the query (packed or not, dim 1 is S)
            shared_parts[key] = _shared(sg, node.input[0], node.input[5], cos, sin, heads // kv_heads)
            rewritten.setdefault(node.name or str(index), []).extend(sg.nodes)
            extra_initializers += sg.initializers
        _rewrite(g, node, heads, kv_heads, scale, size, shared_parts[key])
        rewritten.setdefault(node.name or str(index), []).extend(g.nodes)
        extra_initializers += g.initializers
    nodes = []
    for index, node in enumerate(graph.node):
        if node.op_type == OP and node.domain == MS_DOMAIN:
            nodes.extend(rewritten[node.name or str(targets.index(node))])
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(extra_initializers)
    return len(targets)


def write_unfused(source: str, out: str) -> int:
    """Write ``source``'s graph with its attention unfused to ``out``; the weights stay in the
    source's external data file (``out`` must be in the same folder). Returns the nodes rewritten."""
    import onnx

    if os.path.dirname(os.path.abspath(source)) != os.path.dirname(os.path.abspath(out)):
        raise ValueError(f"{out}: write it next to {source}, whose external data it points at")
    model = onnx.load(source, load_external_data=False)
    count = unfuse(model)
    if not count:
        raise UnfuseError(f"{source}: no {OP} node to rewrite")
    onnx.save(model, out)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    try:
        count = write_unfused(args.source, args.out)
    except (UnfuseError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.out}: {count} {OP} nodes spelled out in standard ops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
