"""Qwen3.5 text decoders (Gated DeltaNet + gated attention) in the transformers.js layout.

transformers.js runs Qwen3.5 (model_type ``qwen3_5`` / ``qwen3_5_text``) as its Qwen-VL family
does, text only from two sessions:

    onnx/embed_tokens{suffix}.onnx          input_ids -> inputs_embeds
    onnx/decoder_model_merged{suffix}.onnx  inputs_embeds, attention_mask, position_ids [3, b, s],
        per layer i: past_conv.i [b, conv_dim, kernel], past_recurrent.i [b, v_heads, k_dim, v_dim]
        (linear_attention) or past_key_values.i.key/value (full_attention)
        -> logits, present_conv.i, present_recurrent.i, present.i.key/value

(its configs.js getCacheNames; its addPastKeyValues starts every state as zeros of the input's
shape, the KV caches empty). The decoder traces transformers' own layers with the state set as
already filled, so one graph serves the prompt and every later step; only the per-token
recurrence of the gated delta rule is a scripted loop (an ONNX Loop over the positions), the
same arithmetic as transformers' torch_recurrent_gated_delta_rule, so no length is baked in.
"""

from __future__ import annotations

import contextlib
import warnings

MODEL_TYPES = ("qwen3_5_text", "qwen3_5")
EMBED, DECODER = "embed_tokens", "decoder_model_merged"


def text_config(cfg):
    """The text config of a Qwen3.5 model (the top-level one of Qwen3_5ForCausalLM)."""
    return getattr(cfg, "text_config", None) or cfg


def is_qwen35(cfg) -> bool:
    return getattr(cfg, "model_type", None) in MODEL_TYPES


def io_names(cfg) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of the decoder, in order: state per layer, as transformers.js names it."""
    past, present = [], []
    for i, kind in enumerate(text_config(cfg).layer_types):
        if kind == "linear_attention":
            past += [f"past_conv.{i}", f"past_recurrent.{i}"]
            present += [f"present_conv.{i}", f"present_recurrent.{i}"]
        else:
            past += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
            present += [f"present.{i}.key", f"present.{i}.value"]
    return ["inputs_embeds", "attention_mask", "position_ids", *past], ["logits", *present]


def _scan():
    import torch

    @torch.jit.script
    def delta_scan(query, key, value, decay, beta, state):
        # [b, h, s, k] x2, [b, h, s, v], [b, h, s] x2, [b, h, k, v]; one position per iteration
        out = torch.zeros_like(value)[:, :, :0]
        for i in range(query.size(2)):
            state = state * decay[:, :, i].exp().unsqueeze(-1).unsqueeze(-1)
            k_t = key[:, :, i].unsqueeze(-1)
            remembered = (state * k_t).sum(-2)
            delta = (value[:, :, i] - remembered) * beta[:, :, i].unsqueeze(-1)
            state = state + k_t * delta.unsqueeze(-2)
            read = (state * query[:, :, i].unsqueeze(-1)).sum(-2)
            out = torch.cat([out, read.unsqueeze(2)], 2)
        return out, state

    return delta_scan


def _gated_delta_rule(scan):
    """transformers' gated delta rule signature, every length through ``scan``."""
    import torch

    def rule(query, key, value, g, beta, initial_state=None, output_final_state=False,
             use_qk_l2norm_in_kernel=False, **kwargs):
        dtype = query.dtype
        k_heads, v_heads = key.shape[2], value.shape[2]
        if k_heads != v_heads:   # each query/key head serves v_heads // k_heads value heads
            query = query.repeat_interleave(v_heads // k_heads, dim=2)
            key = key.repeat_interleave(v_heads // k_heads, dim=2)
        query, key, value, beta, g = [x.transpose(1, 2).to(torch.float32) for x in (query, key, value, beta, g)]
        if use_qk_l2norm_in_kernel:   # as transformers' l2norm (eps 1e-6)
            query = query * torch.rsqrt((query * query).sum(-1, keepdim=True) + 1e-6)
            key = key * torch.rsqrt((key * key).sum(-1, keepdim=True) + 1e-6)
        query = query / (query.shape[-1] ** 0.5)
        out, state = scan(query, key, value, g, beta, initial_state.to(value))
        return out.transpose(1, 2).contiguous().to(dtype), state if output_final_state else None

    return rule


@contextlib.contextmanager
def scanned_delta_rule():
    """transformers' Qwen3.5 chunked and per-token rules replaced by the scripted scan."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    saved = m.torch_chunk_gated_delta_rule, m.torch_recurrent_gated_delta_rule
    m.torch_chunk_gated_delta_rule = m.torch_recurrent_gated_delta_rule = _gated_delta_rule(_scan())
    try:
        yield
    finally:
        m.torch_chunk_gated_delta_rule, m.torch_recurrent_gated_delta_rule = saved


def embed_wrapper(model):
    import torch

    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = model.get_input_embeddings()

        def forward(self, input_ids):
            return self.embed(input_ids)

    return Embed().eval()


def decoder_wrapper(model):
    """Flat tensors around a Qwen3.5 decoder. Each linear-attention layer's conv window and
    recurrent state are set as already filled (zeros on the first step are the padding and the
    empty state transformers would start from) and recorded rather than copied in place."""
    import torch
    from transformers import DynamicCache

    cfg = text_config(model.config)
    width = cfg.linear_conv_kernel_dim

    def keep(layer):
        def update_recurrent_state(states, state_idx=0, **kwargs):
            layer.recurrent_states[state_idx] = states
            return states
        return update_recurrent_state

    class FlatQwen35Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, inputs_embeds, attention_mask, position_ids, *flat):
            cache = DynamicCache(config=cfg)
            for i, kind in enumerate(cfg.layer_types):
                a, b = flat[2 * i], flat[2 * i + 1]
                if kind != "linear_attention":
                    cache.update(a, b, i)
                    continue
                layer = cache.layers[i]
                layer.conv_states[0], layer.conv_kernel_size[0], layer.recurrent_states[0] = a, width, b
                layer.is_conv_states_initialized[0] = layer.is_recurrent_states_initialized[0] = True
                layer.has_previous_state[0] = layer.record_past = True
                layer.device, layer.dtype = a.device, a.dtype
                layer.update_recurrent_state = keep(layer)
            out = self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            present = []
            for i, kind in enumerate(cfg.layer_types):
                layer = out.past_key_values.layers[i]
                if kind == "linear_attention":
                    present += [layer.conv_states[0][..., -width:], layer.recurrent_states[0]]
                else:
                    present += [layer.keys, layer.values]
            return (out.logits, *present)

    return FlatQwen35Decoder().eval()


def state_shapes(cfg, batch: int = 1) -> dict[str, tuple[int, ...]]:
    """The fixed shapes of the conv windows and recurrent states (batch ``batch``)."""
    t = text_config(cfg)
    conv_dim = 2 * t.linear_key_head_dim * t.linear_num_key_heads + t.linear_value_head_dim * t.linear_num_value_heads
    out = {}
    for i, kind in enumerate(t.layer_types):
        if kind == "linear_attention":
            out[f"past_conv.{i}"] = (batch, conv_dim, t.linear_conv_kernel_dim)
            out[f"past_recurrent.{i}"] = (batch, t.linear_num_value_heads, t.linear_key_head_dim,
                                          t.linear_value_head_dim)
    return out


def export(model, onnx_dir, opset: int) -> tuple[str, str]:
    """``embed_tokens.onnx`` and ``decoder_model_merged.onnx`` (fp32) into ``onnx_dir``."""
    import torch

    cfg = text_config(model.config)
    inputs, outputs = io_names(cfg)
    embed_path, decoder_path = f"{onnx_dir}/{EMBED}.onnx", f"{onnx_dir}/{DECODER}.onnx"
    gen = torch.Generator().manual_seed(0)
    past_len, seq = 2, 3   # a non-empty past and several positions: no length is baked in
    shapes = state_shapes(cfg)
    head = cfg.head_dim
    args = [torch.randn(1, seq, cfg.hidden_size, generator=gen), torch.ones(1, past_len + seq, dtype=torch.long),
            torch.arange(past_len, past_len + seq)[None, None].expand(3, 1, seq).contiguous()]
    dyn = {"inputs_embeds": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
           "position_ids": {1: "batch_size", 2: "sequence_length"},
           "logits": {0: "batch_size", 1: "sequence_length"}}
    for name in inputs[3:]:
        if name in shapes:
            args.append(0.5 * torch.randn(*shapes[name], generator=gen))
            dyn[name] = {0: "batch_size"}
        else:
            args.append(torch.randn(1, cfg.num_key_value_heads, past_len, head, generator=gen))
            dyn[name] = {0: "batch_size", 2: "past_sequence_length"}
    for name in outputs[1:]:
        dyn[name] = {0: "batch_size", 2: "total_sequence_length"} if name.startswith("present.") else {0: "batch_size"}
    with warnings.catch_warnings(), torch.no_grad(), scanned_delta_rule():
        warnings.simplefilter("ignore")   # tracer warnings about Python control flow on shapes
        torch.onnx.export(embed_wrapper(model), (torch.tensor([[5, 6, 7]]),), embed_path,
                          input_names=["input_ids"], output_names=["inputs_embeds"],
                          dynamic_axes={"input_ids": {0: "batch_size", 1: "sequence_length"},
                                        "inputs_embeds": {0: "batch_size", 1: "sequence_length"}},
                          opset_version=opset, dynamo=False)
        torch.onnx.export(decoder_wrapper(model), tuple(args), decoder_path, input_names=inputs,
                          output_names=outputs, dynamic_axes=dyn, opset_version=opset, dynamo=False)
    return embed_path, decoder_path
