"""Write a transformers Qwen2 / Llama model's weights as a GGUF file for llama.cpp (wllama).

The sized models' peers read GGUF: this writes the same weights the ONNX files were made
from, with llama.cpp's tensor names and metadata, every 2-D weight in ``Q4_0`` or ``Q8_0``
(blocks of 32 with an fp16 scale, quantized by the `gguf` package's reference code), norms
and biases in F32, and the synthetic tokenizer's vocabulary. What llama.cpp expects and the
HF checkpoint does not hold is made here as llama.cpp's own converter makes it: Llama's Q/K
rows reordered for its interleaved rotary embedding, and Llama 3's ``rope_freqs`` factors.
"""

from __future__ import annotations

import math
import os

from . import synthetic_tokenizer
from .sized_configs import SizedModel, head_dim

QUANTS = ("Q4_0", "Q8_0")
# llama.cpp's LlamaFileType of an all-Q4_0 / all-Q8_0 file
FILE_TYPES = {"Q4_0": 2, "Q8_0": 7}
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf_name: str) -> str:
    """llama.cpp's name of a transformers weight (``model.layers.3.mlp.up_proj.weight`` ->
    ``blk.3.ffn_up.weight``)."""
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    parts = hf_name.split(".")
    if parts[:2] == ["model", "layers"]:
        rest = ".".join(parts[3:])
        if rest in _LAYER_NAMES:
            return f"blk.{parts[2]}.{_LAYER_NAMES[rest]}"
    raise KeyError(f"{hf_name}: no llama.cpp name for this weight")


def interleave_rotary(w, n_head: int):
    """Rows of a Q or K projection reordered from transformers' half-split rotary layout to
    llama.cpp's interleaved one (its "llama" architecture rotates adjacent pairs)."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(config) -> list[float]:
    """Per-frequency divisors of Llama 3's rotary scaling (rope_scaling rope_type "llama3")."""
    scaling = config["rope_scaling"]
    dim, base = head_dim(config), config["rope_theta"]
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for i in range(0, dim, 2):
        wavelen = 2 * math.pi * base ** (i / dim)
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return out


def write_gguf(model: SizedModel, state: dict, path: str, quant: str) -> str:
    """Write ``state`` (name -> torch tensor, fp32) as ``path`` with 2-D weights in ``quant``."""
    import gguf
    import numpy as np

    if quant not in QUANTS:
        raise ValueError(f"quant {quant!r}: choose from {', '.join(QUANTS)}")
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    cfg, arch = model.config, model.arch
    tmp = path + ".part"
    writer = gguf.GGUFWriter(tmp, arch)
    writer.add_name(f"{model.source} (random weights, onnxpipe sized model)")
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_rope_freq_base(cfg["rope_theta"])
    writer.add_file_type(FILE_TYPES[quant])
    if arch == "llama":
        writer.add_rope_dimension_count(head_dim(cfg))
        writer.add_vocab_size(cfg["vocab_size"])
    tokens, types, merges = synthetic_tokenizer.gguf_vocab(model)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(model.gguf_pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    if model.bos:
        writer.add_bos_token_id(model.special[model.bos])
        writer.add_add_bos_token(True)
    else:
        writer.add_add_bos_token(False)
    writer.add_eos_token_id(model.special[model.eos[0]])
    if model.pad:
        writer.add_pad_token_id(model.special[model.pad])
    writer.add_chat_template(model.chat_template)
    if arch == "llama" and cfg.get("rope_scaling", {}).get("rope_type") == "llama3":
        writer.add_tensor("rope_freqs.weight", np.array(llama3_rope_factors(cfg), np.float32))
    for name, tensor in state.items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue   # llama.cpp reads the embedding when output.weight is absent
        data = tensor.detach().float().numpy()
        if arch == "llama" and name.endswith("self_attn.q_proj.weight"):
            data = interleave_rotary(data, cfg["num_attention_heads"])
        elif arch == "llama" and name.endswith("self_attn.k_proj.weight"):
            data = interleave_rotary(data, cfg["num_key_value_heads"])
        if data.ndim == 2:
            writer.add_tensor(gguf_name(name), gguf.quants.quantize(np.ascontiguousarray(data), qtype),
                              raw_dtype=qtype)
        else:
            writer.add_tensor(gguf_name(name), np.ascontiguousarray(data, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)
    return path
