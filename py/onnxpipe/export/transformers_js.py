"""Write an onnx-community / transformers.js style folder from an in-memory transformers model.

    out/config.json  generation_config.json  tokenizer.json  tokenizer_config.json  [chat_template.jinja]
    out/onnx/model.onnx [+ model.onnx_data]   model_fp16.onnx  model_q4.onnx  model_q4f16.onnx ...

The decoder goes through the legacy ``torch.onnx.export(dynamo=False)`` (plain ONNX ops, no
contrib ops) around a wrapper with flat tensors: inputs ``input_ids``, ``attention_mask``,
``position_ids``, ``past_key_values.N.key/value``; outputs ``logits``, ``present.N.key/value``
(LFM2: ``past_conv.N`` -> ``present_conv.N`` for its conv layers, KV for the others; Qwen3.5:
``embed_tokens.onnx`` + ``decoder_model_merged.onnx`` with conv and recurrent state, tjs_qwen35.py).
``merged=True`` writes ``decoder_model_merged*.onnx`` instead, Optimum's layout: the no-past and
with-past graphs under one ``If`` on a bool ``use_cache_branch`` input, weights shared.
Precision variants come from ``onnxpipe.export.precision``. CPython only (torch, onnx).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import warnings
from pathlib import Path

from ..config.transformers_js import DTYPE_SUFFIX
from . import tjs_qwen35

OPSET = 17
# Above this many bytes of weights the graph keeps them in <file>_data (Optimum's naming); the
# ONNX protobuf itself stops at 2 GB.
EXTERNAL_DATA_BYTES = 256 << 20
CACHE_BRANCH = "use_cache_branch"
# precision.py's converter for each variant (fp32 is the export itself)
CONVERTERS = {"fp16": "to_fp16", "q8": "to_q8", "q4": "to_q4", "q4f16": "to_q4f16"}


def io_names(n_layers: int, with_past: bool = True) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of the exported decoder, in order."""
    past = [f"past_key_values.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    return ["input_ids", "attention_mask", "position_ids", *(past if with_past else [])], ["logits", *present]


def cache_wrapper(model, n_layers: int, with_past: bool = True):
    """Flat tensors in and out around a transformers 5 model, whose cache is a DynamicCache object."""
    import torch
    from transformers import DynamicCache

    class FlatCacheDecoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            layers = [(past[2 * i], past[2 * i + 1]) for i in range(n_layers)] if with_past else None
            cache = DynamicCache(ddp_cache_data=layers, config=self.model.config)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (out.logits, *present)

    return FlatCacheDecoder().eval()


def conv_layers(cfg) -> list[int]:
    """LFM2's short-convolution layers (its config's layer_types), [] for other decoders."""
    return [i for i, t in enumerate(getattr(cfg, "layer_types", None) or []) if t == "conv"]


def hybrid_io_names(cfg) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of an exported LFM2 decoder, in order: ``past_conv.N`` /
    ``present_conv.N`` (transformers.js names, window conv_L_cache) for the conv layers, KV for
    the attention layers only."""
    conv = conv_layers(cfg)
    attention = [i for i in range(cfg.num_hidden_layers) if i not in conv]
    past = [f"past_key_values.{i}.{kv}" for i in attention for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in attention for kv in ("key", "value")]
    return (["input_ids", "attention_mask", "position_ids", *[f"past_conv.{i}" for i in conv], *past],
            ["logits", *[f"present_conv.{i}" for i in conv], *present])


def hybrid_wrapper(model):
    """Flat tensors around transformers' LFM2, whose conv windows live in the cache object's
    linear-attention layers. Each window is set as already filled (zeros on the first step
    are the padding the convolution would add) and recorded rather than copied in place, so
    every step traces the general path: window + new positions, convolution, last window kept."""
    import torch
    from transformers import DynamicCache

    cfg = model.config
    conv = conv_layers(cfg)
    attention = [i for i in range(cfg.num_hidden_layers) if i not in conv]
    width = cfg.conv_L_cache

    class FlatHybridDecoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *flat):
            windows, kv = flat[:len(conv)], flat[len(conv):]
            cache = DynamicCache(config=self.model.config)
            for j, i in enumerate(attention):
                cache.update(kv[2 * j], kv[2 * j + 1], i)
            for window, i in zip(windows, conv):
                layer = cache.layers[i]
                layer.conv_states[0], layer.conv_kernel_size[0] = window, width
                layer.is_conv_states_initialized[0] = layer.has_previous_state[0] = True
                layer.record_past = True
                layer.device, layer.dtype = window.device, window.dtype
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            layers = out.past_key_values.layers
            return (out.logits, *[layers[i].conv_states[0][..., -width:] for i in conv],
                    *[t for i in attention for t in (layers[i].keys, layers[i].values)])

    return FlatHybridDecoder().eval()


def _head_dim(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def export_decoder(model, path, with_past: bool = True) -> None:
    """torch.onnx.export (legacy, opset 17) of ``model`` with the transformers.js tensor names."""
    import torch

    cfg = model.config
    n_layers, kv_heads, head = cfg.num_hidden_layers, cfg.num_key_value_heads, _head_dim(cfg)
    hybrid = bool(conv_layers(cfg))
    if hybrid and not with_past:
        raise ValueError("a hybrid (conv-layer) decoder is exported with its state inputs only: "
                         "merged=False")
    inputs, outputs = hybrid_io_names(cfg) if hybrid else io_names(n_layers, with_past)
    past_len = 2 if with_past else 0   # trace with a non-empty past so no length is baked in
    seq = 3
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
           "position_ids": {0: "batch_size", 1: "sequence_length"},
           "logits": {0: "batch_size", 1: "sequence_length"}}
    dyn.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in inputs[3:] if n.startswith("past_key")})
    dyn.update({n: {0: "batch_size", 2: "total_sequence_length"} for n in outputs[1:] if n.startswith("present.")})
    dyn.update({n: {0: "batch_size"} for n in inputs + outputs if "_conv." in n})
    gen = torch.Generator().manual_seed(0)
    args = (torch.tensor([[5, 6, 7]]), torch.ones(1, past_len + seq, dtype=torch.long),
            torch.arange(past_len, past_len + seq)[None],
            *[torch.randn(1, cfg.hidden_size, cfg.conv_L_cache, generator=gen) if "_conv." in n
              else torch.randn(1, kv_heads, past_len, head, generator=gen) for n in inputs[3:]])
    wrapper = hybrid_wrapper(model) if hybrid else cache_wrapper(model, n_layers, with_past)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")   # tracer warnings about Python control flow on shapes
        torch.onnx.export(wrapper, args, str(path), input_names=inputs,
                          output_names=outputs, dynamic_axes=dyn, opset_version=OPSET, dynamo=False)


@contextlib.contextmanager
def eager_attention(model):
    """Eager attention while exporting: it traces to plain MatMul/Softmax, no SDPA graph."""
    before = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        model.set_attn_implementation(before)


# ---------------------------------------------------------------- merged decoder (ONNX If)

def _branch(graph, prefix: str, renamed: dict[str, str], outputs):
    """``graph`` as an If branch: no inputs, its weights read from the outer scope under their
    shared names (``renamed``), every other name prefixed (the branches must not clash)."""
    from onnx import helper

    inputs = {i.name for i in graph.input}

    def name(n: str) -> str:
        if not n or n in inputs:
            return n
        return renamed.get(n, prefix + n)

    nodes = []
    for node in graph.node:
        new = helper.make_node(node.op_type, [name(i) for i in node.input], [name(o) for o in node.output],
                               name=prefix + node.name if node.name else "", domain=node.domain)
        new.attribute.extend(node.attribute)   # torch's export has no nested graphs to rename
        nodes.append(new)
    outs = []
    for own, main in zip(graph.output, outputs):
        vi = type(main)()
        vi.CopyFrom(main)           # both branches declare the with-past output types
        vi.name = name(own.name)
        outs.append(vi)
    return helper.make_graph(nodes, prefix.strip("/") + "_branch", [], outs)


def merge_decoders(no_past, with_past):
    """One ModelProto: ``If(use_cache_branch, with_past, no_past)``, identical weights stored once."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    canonical: dict[tuple, str] = {}
    initializers = []
    used: set[str] = set()
    renames: list[dict[str, str]] = [{}, {}]
    for k, model in enumerate((with_past, no_past)):
        for init in model.graph.initializer:
            arr = numpy_helper.to_array(init)
            key = (init.data_type, tuple(init.dims), hashlib.sha256(np.ascontiguousarray(arr).tobytes()).digest())
            if key not in canonical:
                target = init.name if init.name not in used else f"{init.name}__{k}"
                canonical[key] = target
                used.add(target)
                tensor = numpy_helper.from_array(arr, target)
                initializers.append(tensor)
            renames[k][init.name] = canonical[key]
    graph_inputs = list(with_past.graph.input)
    outputs = list(with_past.graph.output)
    then_g = _branch(with_past.graph, "with_past/", renames[0], outputs)
    else_g = _branch(no_past.graph, "no_past/", renames[1], outputs)
    flag = helper.make_tensor_value_info(CACHE_BRANCH, TensorProto.BOOL, [1])
    node = helper.make_node("If", [CACHE_BRANCH], [o.name for o in outputs], name="optimum::if",
                            then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "merged_decoder", graph_inputs + [flag], outputs, initializers)
    merged = helper.make_model(graph, opset_imports=list(with_past.opset_import),
                               producer_name="onnxpipe.export.transformers_js")
    merged.ir_version = with_past.ir_version   # what the exporter wrote, not onnx's newest
    return merged


# ---------------------------------------------------------------- saving and the folder

def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def save_onnx(proto, path, external_data: bool) -> list[str]:
    """Write ``proto`` to ``path`` (weights in ``<file>_data`` if asked); returns the files written."""
    import onnx

    path = Path(path)
    data = path.with_name(path.name + "_data")
    data.unlink(missing_ok=True)   # onnx appends to an existing data file
    if not external_data:
        onnx.save_model(proto, str(path))
        return [str(path)]
    onnx.save_model(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=1024)
    return [str(path), str(data)]


def _remove(path: Path) -> None:
    for p in (path, path.with_name(path.name + "_data")):
        p.unlink(missing_ok=True)


def export_folder(model, tokenizer, out_dir, dtypes=("fp32", "fp16", "q4", "q4f16"), merged: bool = False,
                  external_data: bool | None = None) -> dict[str, str]:
    """Write ``out_dir`` as onnx-community publishes transformers.js models; returns dtype -> file.

    ``external_data`` None decides by size (EXTERNAL_DATA_BYTES). The tokenizer's chat template,
    if any, is saved with it.
    """
    import onnx

    unknown = [d for d in dtypes if d not in DTYPE_SUFFIX]
    unsupported = [d for d in dtypes if d != "fp32" and d in DTYPE_SUFFIX and d not in CONVERTERS]
    if unknown or unsupported:
        raise ValueError(f"dtypes {unknown + unsupported} can't be written; choose from fp32, "
                         f"{', '.join(CONVERTERS)}")
    out = Path(out_dir)
    onnx_dir = out / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    external = weight_bytes(model) > EXTERNAL_DATA_BYTES if external_data is None else external_data
    qwen35 = tjs_qwen35.is_qwen35(model.config)
    # the files of each dtype, the decoder last (Qwen3.5: embed_tokens + decoder_model_merged)
    bases = (tjs_qwen35.EMBED, tjs_qwen35.DECODER) if qwen35 else ("decoder_model_merged" if merged else "model",)
    if qwen35 and merged:
        raise ValueError("a Qwen3.5 decoder is exported with its state inputs only: merged=False")
    tmp = onnx_dir / ".export"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        with eager_attention(model):
            if qwen35:
                traced = tjs_qwen35.export(model, str(tmp), OPSET)
            else:
                export_decoder(model, tmp / "with_past.onnx", with_past=True)
                if merged:
                    export_decoder(model, tmp / "no_past.onnx", with_past=False)
                traced = (str(tmp / "with_past.onnx"),)
        for base, path in zip(bases, traced):
            if merged:
                proto = merge_decoders(onnx.load(str(tmp / "no_past.onnx")), onnx.load(path))
            else:
                proto = onnx.load(path)
            save_onnx(proto, onnx_dir / f"{base}.onnx", external)
            del proto
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    written = {"fp32": str(onnx_dir / f"{bases[-1]}.onnx")}
    for dtype in dtypes:
        if dtype == "fp32":
            continue
        from . import precision

        for base in bases:
            dst = onnx_dir / f"{base}{DTYPE_SUFFIX[dtype]}.onnx"
            _remove(dst)
            # external_data None: precision.py decides by the variant's own size
            getattr(precision, CONVERTERS[dtype])(str(onnx_dir / f"{base}.onnx"), str(dst), external=external_data)
        written[dtype] = str(dst)
    if "fp32" not in dtypes:
        for base in bases:
            _remove(onnx_dir / f"{base}.onnx")
        del written["fp32"]
    model.config.to_json_file(str(out / "config.json"))
    model.generation_config.to_json_file(str(out / "generation_config.json"))
    tokenizer.save_pretrained(str(out))
    return written


def _cli(argv=None) -> int:
    import argparse

    from transformers import AutoModelForCausalLM, AutoTokenizer

    p = argparse.ArgumentParser(prog="python -m onnxpipe.export.transformers_js",
                                description="Hugging Face folder -> transformers.js folder")
    p.add_argument("model", help="a local transformers model folder")
    p.add_argument("out")
    p.add_argument("--dtype", action="append", help=f"variants to write (default fp32); any of fp32, "
                   f"{', '.join(CONVERTERS)}")
    p.add_argument("--merged", action="store_true", help="write decoder_model_merged*.onnx (If-merged)")
    a = p.parse_args(argv)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype="float32").eval()
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    for dtype, path in export_folder(model, tokenizer, a.out, tuple(a.dtype or ["fp32"]), a.merged).items():
        print(f"{dtype}: {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
