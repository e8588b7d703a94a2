"""A decoder variant for onnxruntime-web's WASM backend, made from an fp32 genai export.

onnxruntime-web's WASM build has no fast int4 kernel (MatMulNBits is expanded to fp32 on every
call, ~7x slower than int8), and the int4 file is the one the native bundle ships. Two recipes:

``weights="fp16"`` (the default, the one the SmolLM2 bundle ships): every MatMul weight is
stored as fp16 and cast to fp32 in the graph (Cast -> MatMul); onnxruntime folds those constant
Casts when the session is created, so the variant downloads half the bytes of fp32 and runs
exactly fp32's kernels. The tied embedding / lm_head table stays one fp16 table, read by the
export's own Transpose -> Gather, then a Cast. Measured on SmolLM2-135M (7 chat prompts x 32
greedy tokens, onnxruntime CPU): 224/224 tokens equal fp32's, teacher-forced top-1 100%, mean
|logit diff| 0.004; onnxruntime-web WASM at 1 thread decodes as fast as fp32 (~24 tokens/s).

``weights="int8"``: MatMul weights -> per-output-channel int8 (stored as uint8, zero point
128); activations quantized per token in the graph (Abs, ReduceMax, Div, Round, Cast -> uint8)
and multiplied by MatMulInteger, then rescaled (Cast, Mul, Mul). Per token, not per tensor: in a
prefill one token's massive activations would set the scale of all. ``keep_fp32`` leaves MatMuls
in fp32; ``smooth_alpha`` (+ ``calibration`` token ids) applies SmoothQuant, folded into the
norms / up_proj. Not the shipped recipe: SmolLM2-135M is too sensitive (even weight-only
per-channel int8 gives only 169/224 greedy tokens, 97.3% teacher-forced top-1), and in
onnxruntime-web 1.30's WASM build int8 GEMV is barely faster than fp32 (DynamicQuantizeMatMul
~1.1x, the per-token recipe 0.9-1.07x at 1 thread).

Only standard ops plus the export's GroupQueryAttention: no MatMulNBits, no GatherBlockQuantized.
Input and output names are those of the genai export (input_ids, attention_mask,
past_key_values.{i}.key/value -> logits, present.{i}.key/value), so one pipeline.json serves
every variant. ``greedy_tokens`` runs a variant natively (separate past/present) for checks.

    PYTHONPATH=py python -m onnxpipe.export.wasm_variant FP32_MODEL.onnx OUT.onnx [--weights int8]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Iterable

# Bump when the recipe changes the variant's bytes.
RECIPE_VERSION = 2
WEIGHTS = ("fp16", "int8")  # recipes, the default first
DEFAULT_KEEP_FP32 = ("down_proj",)  # int8 recipe: substrings of MatMul node names left in fp32
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


def _fp16_weights(graph, arrays: dict) -> list[str]:
    """Store every constant MatMul weight as fp16 behind a Cast (folded by onnxruntime at load).

    The genai export ties the embedding to lm_head (Transpose(lm_head weight) -> Gather): the
    Transpose then reads the fp16 table and a Cast follows the Gather, so the table is stored once.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    done = []
    for node in list(graph.node):
        if node.op_type != "MatMul" or node.input[1] not in arrays or arrays[node.input[1]].dtype != np.float32:
            continue
        name = node.input[1]
        half, full = f"{name}_fp16", f"{name}_fp16_cast"
        if not any(init.name == half for init in graph.initializer):
            graph.initializer.append(numpy_helper.from_array(arrays[name].astype(np.float16), half))
        at = list(graph.node).index(node)
        graph.node.insert(at, helper.make_node("Cast", [half], [full], name=f"{node.name}/CastWeight",
                                               to=TensorProto.FLOAT))
        node.input[1] = full
        for other in consumers.get(name, []):
            if other is node or other.op_type == "MatMul":
                continue
            if other.op_type != "Transpose" or other.name != EMBED_TRANSPOSE:
                raise RuntimeError(f"{name} is also read by {other.op_type} {other.name}")
            other.input[0] = half
            for info in list(graph.value_info):  # the Transpose's output is fp16 now
                if info.name == other.output[0]:
                    graph.value_info.remove(info)
            gather = next(n for n in graph.node if n.name == EMBED_GATHER)
            out = gather.output[0]
            gather.output[0] = "/model/embed_tokens/fp16"
            graph.node.insert(list(graph.node).index(gather) + 1, helper.make_node(
                "Cast", ["/model/embed_tokens/fp16"], [out], name="/model/embed_tokens/Cast", to=TensorProto.FLOAT))
        done.append(node.name)
    return done


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


def calibrate(fp32_path: str, sequences: list[list[int]], tensors: Iterable[str]) -> dict:
    """Per-channel max |x| of the named float tensors, over prefills of ``sequences`` (fp32 model)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = onnx.load(fp32_path)
    wanted = list(dict.fromkeys(tensors))
    known = {o.name for o in model.graph.output}
    for name in wanted:
        if name not in known:
            model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the tensors
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    past = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    result = {}
    for ids in sequences:
        feeds = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3] if isinstance(i.shape[3], int) else 64),
                                  np.float32) for i in past}
        feeds["input_ids"] = np.array([ids], np.int64)
        feeds["attention_mask"] = np.ones((1, len(ids)), np.int64)
        for name, value in zip(wanted, session.run(wanted, feeds)):
            peak = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            result[name] = peak if name not in result else np.maximum(result[name], peak)
    return result


def _smooth(graph, arrays: dict, act_max: dict, alpha: float, wanted: Callable[[str], bool]) -> int:
    """SmoothQuant: move activation outliers of quantized MatMuls' inputs into their weights.

    For the input x of quantized MatMuls, s_j = max|x_j|^alpha / max|W_j|^(1 - alpha); the
    weight rows of every MatMul reading x are multiplied by s and x is divided by s where it
    is made: folded into the (Skip)SimplifiedLayerNormalization weight, or into the columns of
    the up_proj feeding the MLP's gate product. Inputs made elsewhere (o_proj's, from attention)
    are left as they are. Exact in real numbers. Returns how many inputs were smoothed.
    """
    import numpy as np

    producers = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    done = 0
    for x, peak in act_max.items():
        readers = consumers.get(x, [])
        if not readers or not any(n.op_type == "MatMul" and wanted(n.name) for n in readers):
            continue
        if not all(n.op_type == "MatMul" and n.input[0] == x and n.input[1] in arrays for n in readers):
            continue
        w_max = np.max([np.abs(arrays[n.input[1]]).max(axis=1) for n in readers], axis=0)
        s = (np.maximum(peak, 1e-5) ** alpha) / (np.maximum(w_max, 1e-5) ** (1.0 - alpha))
        s = np.clip(s, 1e-3, 1e3).astype(np.float32)
        made = producers.get(x)
        target = None
        if made is not None and made.op_type in ("SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization") \
                and made.output[0] == x:
            target = ("norm", made.input[1 if made.op_type == "SimplifiedLayerNormalization" else 2])
        elif made is not None and made.op_type == "Mul":
            for other in made.input:
                up = producers.get(other)
                if up is not None and up.op_type == "MatMul" and up.input[1] in arrays \
                        and len(consumers.get(other, [])) == 1:
                    target = ("columns", up.input[1])
                    break
        if target is None or len(consumers.get(target[1], [])) != 1:
            continue  # not foldable: left as is
        kind, name = target
        arrays[name] = (arrays[name] / s if kind == "norm" else arrays[name] / s[None, :]).astype(np.float32)
        _replace_initializer(graph, name, arrays[name])
        for n in readers:
            arrays[n.input[1]] = (arrays[n.input[1]] * s[:, None]).astype(np.float32)
            _replace_initializer(graph, n.input[1], arrays[n.input[1]])
        done += 1
    return done


def _replace_initializer(graph, name: str, value) -> None:
    from onnx import numpy_helper

    for k, init in enumerate(graph.initializer):
        if init.name == name:
            graph.initializer[k].CopyFrom(numpy_helper.from_array(value, name))
            return
    raise KeyError(name)


def make_variant(fp32_path: str, out_path: str, keep_fp32: Iterable[str] = DEFAULT_KEEP_FP32,
                 embedding: str = "fp16", weights: str = "fp16",
                 quantize_node: Callable[[str], bool] | None = None,
                 smooth_alpha: float | None = None, calibration: list[list[int]] | None = None) -> list[str]:
    """Write the WASM variant of ``fp32_path`` to ``out_path`` (+ ``out_path``.data).

    ``weights="fp16"``: every MatMul weight stored fp16 (the other arguments do not apply).
    ``weights="int8"``: ``keep_fp32`` lists substrings of MatMul node names to leave in fp32;
    ``quantize_node`` (a name -> bool) overrides it when given; ``embedding`` is the untied
    table's format; ``smooth_alpha`` applies SmoothQuant calibrated on ``calibration`` (token
    id lists, prefilled on the fp32 model). Returns the names of the MatMuls it converted.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(fp32_path)  # external data included
    graph = model.graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")
    if weights == "fp16":
        quantized = _fp16_weights(graph, arrays)
        _save(model, out_path)
        return quantized
    _untie_embedding(graph, arrays, embedding)
    keep = tuple(keep_fp32)
    wanted = quantize_node or (lambda name: not any(k in name for k in keep))
    if smooth_alpha is not None:
        inputs = [n.input[0] for n in graph.node if n.op_type == "MatMul" and n.input[1] in arrays and wanted(n.name)]
        _smooth(graph, arrays, calibrate(fp32_path, calibration, inputs), smooth_alpha, wanted)
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
    _save(model, out_path)
    return quantized


def _save(model, out_path: str) -> None:
    """Drop unused initializers; write out_path + one external data file, world-readable."""
    import onnx
    from onnx import helper

    graph = model.graph
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
    parser.add_argument("--weights", default=WEIGHTS[0], choices=WEIGHTS, help="MatMul weight recipe")
    parser.add_argument("--keep-fp32", default=",".join(DEFAULT_KEEP_FP32),
                        help="int8: comma-separated MatMul name substrings left in fp32")
    parser.add_argument("--embedding", default="fp16", choices=("fp32", "fp16", "int8"),
                        help="int8: embedding table format")
    args = parser.parse_args(argv)
    keep = [k for k in args.keep_fp32.split(",") if k]
    done = make_variant(args.fp32_model, args.out, keep, embedding=args.embedding, weights=args.weights)
    print(f"{args.weights}: {len(done)} MatMuls -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
