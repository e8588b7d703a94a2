"""A decoder variant for onnxruntime-web's WASM backend, made from an fp32 genai export.

onnxruntime-web's WASM build has no fast int4 kernel (MatMulNBits is expanded to fp32 on every
call, ~7x slower than int8), and fp32 is faithful but slow. This module writes an int8 variant:

* MatMul weights -> per-output-channel int8 (stored as uint8, zero point 128); activations
  quantized per token in the graph (Abs, ReduceMax, Div, Round, Cast -> uint8) and multiplied
  by MatMulInteger, then rescaled (Cast, Mul, Mul). Per token, not per tensor: in a prefill one
  token's massive activations would set the scale of all (ORT's DynamicQuantizeLinear /
  quantize_dynamic is per tensor and lost the answer from the first token); per-channel weights
  (quantize_dynamic's per_channel gave garbage for MatMul here).
* the MLP ``down_proj`` MatMuls stay fp32: their inputs carry SmolLM2's massive activations.
* the embedding table (tied to lm_head in the genai export, read through a Transpose) becomes
  its own fp16 table (Gather + Cast); int8 rows lost agreement. lm_head is int8 like the rest.
  Only standard ops plus the export's GroupQueryAttention: no MatMulNBits, no GatherBlockQuantized.

Input and output names are those of the genai export (input_ids, attention_mask,
past_key_values.{i}.key/value -> logits, present.{i}.key/value), so one pipeline.json serves
every variant. ``greedy_tokens`` runs a variant natively (separate past/present) for checks.

    PYTHONPATH=py python -m onnxpipe.export.wasm_variant FP32_MODEL.onnx OUT.onnx
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Iterable

# Bump when the recipe changes the variant's bytes.
RECIPE_VERSION = 1
DEFAULT_KEEP_FP32 = ("down_proj",)  # substrings of MatMul node names left in fp32
EMBED_TRANSPOSE = "/model/embed_tokens/Transpose"
EMBED_GATHER = "/model/embed_tokens/Gather"
MS_DOMAIN = "com.microsoft"  # GroupQueryAttention etc. in the export


def _quantize_columns(weight):
    """Symmetric per-column int8 of a [K, N] weight, stored as uint8 + zero point 128."""
    import numpy as np

    scale = np.abs(weight).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(weight / scale), -127, 127).astype(np.int16) + 128
    return q.astype(np.uint8), scale.astype(np.float32), np.full(weight.shape[1], 128, np.uint8)


def _quantize_rows(table):
    """Symmetric per-row int8 of a [V, H] table: (int8 table, float scale [V, 1])."""
    import numpy as np

    scale = np.abs(table).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)[:, None]


def _untie_embedding(graph, arrays: dict, embedding: str) -> None:
    """Replace the genai export's Transpose(lm_head weight) -> Gather by a table of its own."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = {n.name: n for n in graph.node}
    transpose, gather = nodes.get(EMBED_TRANSPOSE), nodes.get(EMBED_GATHER)
    if gather is None:
        raise RuntimeError(f"no {EMBED_GATHER} node: not a genai llama export?")
    if transpose is not None:
        table = arrays[transpose.input[0]].T.copy()
        graph.node.remove(transpose)
    else:
        table = arrays[gather.input[0]]
    ids = gather.input[1]
    out = gather.output[0]
    if embedding == "fp32":
        graph.initializer.append(numpy_helper.from_array(table, "model.embed_tokens.weight"))
        gather.input[0] = "model.embed_tokens.weight"
        return
    if embedding == "fp16":
        graph.initializer.append(numpy_helper.from_array(table.astype("float16"), "model.embed_tokens.weight_fp16"))
        gather.input[0] = "model.embed_tokens.weight_fp16"
        gather.output[0] = "/model/embed_tokens/fp16"
        at = list(graph.node).index(gather)
        graph.node.insert(at + 1, helper.make_node("Cast", ["/model/embed_tokens/fp16"], [out],
                                                   name="/model/embed_tokens/Cast", to=TensorProto.FLOAT))
        return
    if embedding != "int8":
        raise ValueError(f"embedding must be fp32, fp16 or int8, not {embedding!r}")
    q, scale = _quantize_rows(table)
    graph.initializer.extend([numpy_helper.from_array(q, "model.embed_tokens.weight_q"),
                              numpy_helper.from_array(scale, "model.embed_tokens.weight_scale")])
    at = list(graph.node).index(gather)
    graph.node.remove(gather)
    p = "/model/embed_tokens"
    new = [
        helper.make_node("Gather", ["model.embed_tokens.weight_q", ids], [f"{p}/q"], name=EMBED_GATHER, axis=0),
        helper.make_node("Gather", ["model.embed_tokens.weight_scale", ids], [f"{p}/scale"], name=f"{p}/GatherScale", axis=0),
        helper.make_node("Cast", [f"{p}/q"], [f"{p}/qf"], name=f"{p}/Cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", [f"{p}/qf", f"{p}/scale"], [out], name=f"{p}/Mul"),
    ]
    for k, node in enumerate(new):
        graph.node.insert(at + k, node)


_ZP128 = "onnxpipe.u8_zero_point_128"
_AXES = "onnxpipe.axes_last"
_INV127 = "onnxpipe.inv_127"
_TINY = "onnxpipe.tiny"
_F128 = "onnxpipe.f32_128"


def _quantize_rows_nodes(x: str, name: str) -> list:
    """Nodes quantizing activation x per row (per token): uint8 with zero point 128.

    x_scale = max(|x|, over the last axis) / 127; x_q = uint8(round(x / x_scale) + 128).
    Per token, not per tensor: in a prefill, one token's massive activations would otherwise
    set the scale for every token.
    """
    from onnx import TensorProto, helper

    p = name
    return [
        helper.make_node("Abs", [x], [f"{p}/x_abs"], name=f"{p}/Abs"),
        helper.make_node("ReduceMax", [f"{p}/x_abs", _AXES], [f"{p}/x_max"], name=f"{p}/ReduceMax", keepdims=1),
        helper.make_node("Max", [f"{p}/x_max", _TINY], [f"{p}/x_max_nz"], name=f"{p}/MaxTiny"),
        helper.make_node("Mul", [f"{p}/x_max_nz", _INV127], [f"{p}/x_scale"], name=f"{p}/Scale"),
        helper.make_node("Div", [x, f"{p}/x_scale"], [f"{p}/x_div"], name=f"{p}/Div"),
        helper.make_node("Round", [f"{p}/x_div"], [f"{p}/x_round"], name=f"{p}/Round"),
        helper.make_node("Add", [f"{p}/x_round", _F128], [f"{p}/x_shift"], name=f"{p}/Add128"),
        helper.make_node("Cast", [f"{p}/x_shift"], [f"{p}/x_q"], name=f"{p}/CastU8", to=TensorProto.UINT8),
    ]


def make_variant(fp32_path: str, out_path: str, keep_fp32: Iterable[str] = DEFAULT_KEEP_FP32,
                 embedding: str = "fp16",
                 quantize_node: Callable[[str], bool] | None = None) -> list[str]:
    """Write the int8 WASM variant of ``fp32_path`` to ``out_path`` (+ ``out_path``.data).

    Returns the names of the MatMuls it quantized. ``keep_fp32`` lists substrings of MatMul
    node names to leave in fp32; ``quantize_node`` (a name -> bool) overrides it when given.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(fp32_path)  # external data included
    graph = model.graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    _untie_embedding(graph, arrays, embedding)
    keep = tuple(keep_fp32)
    wanted = quantize_node or (lambda name: not any(k in name for k in keep))
    quantized = []
    activations: dict[str, tuple[str, str]] = {}  # float input -> (uint8 tensor, scale [.., 1])
    for node in list(graph.node):
        if node.op_type != "MatMul" or node.input[1] not in arrays or not wanted(node.name):
            continue
        weight = arrays[node.input[1]]
        if weight.ndim != 2 or weight.dtype != np.float32:
            continue
        q, scale, zero = _quantize_columns(weight)
        base = node.input[1]
        graph.initializer.extend([numpy_helper.from_array(q, f"{base}_quantized"),
                                  numpy_helper.from_array(scale, f"{base}_scale"),
                                  numpy_helper.from_array(zero, f"{base}_zero_point")])
        at = list(graph.node).index(node)
        new = []
        if node.input[0] not in activations:
            new += _quantize_rows_nodes(node.input[0], node.name)
            activations[node.input[0]] = (f"{node.name}/x_q", f"{node.name}/x_scale")
        x_q, x_scale = activations[node.input[0]]
        n = node.name
        new += [
            helper.make_node("MatMulInteger", [x_q, f"{base}_quantized", _ZP128, f"{base}_zero_point"],
                             [f"{n}/y_int"], name=f"{n}Integer"),
            helper.make_node("Cast", [f"{n}/y_int"], [f"{n}/y_f"], name=f"{n}/Cast", to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{n}/y_f", x_scale], [f"{n}/y_x"], name=f"{n}/MulX"),
            helper.make_node("Mul", [f"{n}/y_x", f"{base}_scale"], list(node.output), name=f"{n}/MulW"),
        ]
        graph.node.remove(node)
        for k, item in enumerate(new):
            graph.node.insert(at + k, item)
        quantized.append(node.name)
    if quantized:
        graph.initializer.extend([numpy_helper.from_array(np.array(128, np.uint8), _ZP128),
                                  numpy_helper.from_array(np.array([-1], np.int64), _AXES),
                                  numpy_helper.from_array(np.array(1.0 / 127.0, np.float32), _INV127),
                                  numpy_helper.from_array(np.array(1e-12, np.float32), _TINY),
                                  numpy_helper.from_array(np.array(128.0, np.float32), _F128)])
    still_used = {i for n in graph.node for i in n.input}
    for init in list(graph.initializer):
        if init.name not in still_used:
            graph.initializer.remove(init)
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    data_name = os.path.basename(out_path) + ".data"
    for path in (out_path, os.path.join(os.path.dirname(out_path) or ".", data_name)):
        if os.path.exists(path):
            os.remove(path)
    onnx.save(model, out_path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=data_name, size_threshold=1024)
    for path in (out_path, os.path.join(os.path.dirname(out_path) or ".", data_name)):
        os.chmod(path, 0o644)
    return quantized


def greedy_tokens(model_path: str, prompt_ids: list[int], n: int, threads: int = 0,
                  num_layers: int | None = None) -> list[int]:
    """Greedy tokens from a genai-style decoder run natively, KV fed back as separate tensors."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    past = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    feeds = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3] if isinstance(i.shape[3], int) else 64),
                              np.float32) for i in past}
    names = [o.name for o in session.get_outputs()]
    tokens, current, total = [], list(prompt_ids), 0
    for _ in range(n):
        total += len(current)
        feeds["input_ids"] = np.array([current], np.int64)
        feeds["attention_mask"] = np.ones((1, total), np.int64)
        result = dict(zip(names, session.run(None, feeds)))
        token = int(np.argmax(result["logits"][0, -1]))
        tokens.append(token)
        for i in past:
            feeds[i.name] = result[i.name.replace("past_key_values.", "present.")]
        current = [token]
    return tokens


def agreement(reference: list[int], tokens: list[int]) -> int:
    """How many leading tokens are identical."""
    count = 0
    for a, b in zip(reference, tokens):
        if a != b:
            break
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fp32_model")
    parser.add_argument("out")
    parser.add_argument("--keep-fp32", default=",".join(DEFAULT_KEEP_FP32),
                        help="comma-separated MatMul name substrings left in fp32")
    parser.add_argument("--embedding", default="fp16", choices=("fp32", "fp16", "int8"),
                        help="embedding table format")
    args = parser.parse_args(argv)
    keep = [k for k in args.keep_fp32.split(",") if k]
    done = make_variant(args.fp32_model, args.out, keep, embedding=args.embedding)
    print(f"quantized {len(done)} MatMuls -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
