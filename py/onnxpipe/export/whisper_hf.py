"""CTranslate2 Whisper weights (``whisper_ct2.read_model``) -> transformers'
``WhisperForConditionalGeneration`` in fp32, with the generation settings of the package.

Dims come from the weights' shapes, the head counts from the model's own attributes; only the
names below are Whisper knowledge. CTranslate2 fuses projections: self-attention ``linear_0``
is q|k|v stacked (the key has no bias in Whisper: its slice of the fused bias is zero),
cross-attention ``linear_0`` is q and ``linear_1`` k|v; the last ``linear_*`` is the output.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .whisper_ct2 import CT2Model

# The decoder prompt (start, language, task, no timestamps): token names in tokenizer.json.
PREFIX_TOKENS = ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")
EOS_TOKEN = "<|endoftext|>"
TASK_TOKENS = {"transcribe": "<|transcribe|>", "translate": "<|translate|>"}


def token_ids(tokenizer_json: Path) -> dict[str, int]:
    """Special token name -> id, from tokenizer.json's added tokens."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    return {t["content"]: t["id"] for t in data.get("added_tokens", [])}


def _layers(model: CT2Model, prefix: str) -> int:
    n = 0
    while f"{prefix}/layer_{n}/ffn/linear_0/weight" in model.variables:
        n += 1
    return n


def make_config(model: CT2Model, package_config: dict, special: dict[str, int]):
    """A transformers WhisperConfig matching the weights (+ the package's suppression lists)."""
    from transformers import WhisperConfig

    vocab, d_model = model.get("decoder/embeddings/weight").shape
    return WhisperConfig(
        vocab_size=int(vocab), d_model=int(d_model),
        num_mel_bins=int(model.get("encoder/conv1/weight").shape[1]),
        encoder_layers=_layers(model, "encoder"), decoder_layers=_layers(model, "decoder"),
        encoder_attention_heads=int(model.get("encoder/num_heads")),
        decoder_attention_heads=int(model.get("decoder/num_heads")),
        encoder_ffn_dim=int(model.get("encoder/layer_0/ffn/linear_0/weight").shape[0]),
        decoder_ffn_dim=int(model.get("decoder/layer_0/ffn/linear_0/weight").shape[0]),
        max_source_positions=int(model.get("encoder/position_encodings/encodings").shape[0]),
        max_target_positions=int(model.get("decoder/position_encodings/encodings").shape[0]),
        decoder_start_token_id=special[PREFIX_TOKENS[0]], eos_token_id=special[EOS_TOKEN],
        pad_token_id=special[EOS_TOKEN], bos_token_id=special[EOS_TOKEN],
        suppress_tokens=list(package_config["suppress_ids"]),
        begin_suppress_tokens=list(package_config["suppress_ids_begin"]),
        scale_embedding=False, activation_function="gelu", tie_word_embeddings=True)


def generation_config(config, package_config: dict, special: dict[str, int]):
    """What WhisperForConditionalGeneration.generate needs for English transcription."""
    from transformers import GenerationConfig

    languages = {name: i for name, i in special.items() if i in set(package_config["lang_ids"])}
    return GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id, eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id, max_length=config.max_target_positions,
        suppress_tokens=list(config.suppress_tokens),
        begin_suppress_tokens=list(config.begin_suppress_tokens),
        lang_to_id=languages, task_to_id={k: special[v] for k, v in TASK_TOKENS.items()},
        no_timestamps_token_id=special["<|notimestamps|>"], is_multilingual=True,
        do_sample=False, num_beams=1)


def state_dict(model: CT2Model, config) -> dict[str, np.ndarray]:
    """transformers parameter name -> fp32 array."""
    get = lambda name: np.asarray(model.get(name), dtype=np.float32)   # noqa: E731
    d = config.d_model
    out: dict[str, np.ndarray] = {}

    def linear(hf: str, ct2: str, bias: bool = True):
        out[f"{hf}.weight"] = get(f"{ct2}/weight")
        if bias:
            out[f"{hf}.bias"] = get(f"{ct2}/bias")

    def norm(hf: str, ct2: str):
        out[f"{hf}.weight"] = get(f"{ct2}/gamma")
        out[f"{hf}.bias"] = get(f"{ct2}/beta")

    def fused(hf: str, weight: np.ndarray, bias: np.ndarray, names: tuple[str, ...]):
        for i, name in enumerate(names):
            out[f"{hf}.{name}.weight"] = weight[i * d:(i + 1) * d]
            if name != "k_proj":   # Whisper's key projections have no bias
                out[f"{hf}.{name}.bias"] = bias[i * d:(i + 1) * d]

    def ffn(hf: str, ct2: str):
        norm(f"{hf}.final_layer_norm", f"{ct2}/ffn/layer_norm")
        linear(f"{hf}.fc1", f"{ct2}/ffn/linear_0")
        linear(f"{hf}.fc2", f"{ct2}/ffn/linear_1")

    def self_attention(hf: str, ct2: str):
        sa = f"{ct2}/self_attention"
        norm(f"{hf}.self_attn_layer_norm", f"{sa}/layer_norm")
        fused(f"{hf}.self_attn", get(f"{sa}/linear_0/weight"), get(f"{sa}/linear_0/bias"),
              ("q_proj", "k_proj", "v_proj"))
        linear(f"{hf}.self_attn.out_proj", f"{sa}/linear_1")

    for name in ("conv1", "conv2"):
        linear(f"model.encoder.{name}", f"encoder/{name}")
    out["model.encoder.embed_positions.weight"] = get("encoder/position_encodings/encodings")
    for i in range(config.encoder_layers):
        self_attention(f"model.encoder.layers.{i}", f"encoder/layer_{i}")
        ffn(f"model.encoder.layers.{i}", f"encoder/layer_{i}")
    norm("model.encoder.layer_norm", "encoder/layer_norm")

    out["model.decoder.embed_tokens.weight"] = get("decoder/embeddings/weight")
    out["model.decoder.embed_positions.weight"] = get("decoder/position_encodings/encodings")
    for i in range(config.decoder_layers):
        hf, ct2 = f"model.decoder.layers.{i}", f"decoder/layer_{i}"
        self_attention(hf, ct2)
        ca = f"{ct2}/attention"
        norm(f"{hf}.encoder_attn_layer_norm", f"{ca}/layer_norm")
        linear(f"{hf}.encoder_attn.q_proj", f"{ca}/linear_0")
        fused(f"{hf}.encoder_attn", get(f"{ca}/linear_1/weight"), get(f"{ca}/linear_1/bias"),
              ("k_proj", "v_proj"))
        linear(f"{hf}.encoder_attn.out_proj", f"{ca}/linear_2")
        ffn(hf, ct2)
    norm("model.decoder.layer_norm", "decoder/layer_norm")
    out["proj_out.weight"] = out["model.decoder.embed_tokens.weight"]
    return out


def load_hf(model: CT2Model, package_config: dict, tokenizer_json: Path):
    """(WhisperForConditionalGeneration in eval mode, fp32, special token ids)."""
    import torch
    from transformers import WhisperForConditionalGeneration

    special = token_ids(tokenizer_json)
    config = make_config(model, package_config, special)
    hf = WhisperForConditionalGeneration(config)
    weights = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state_dict(model, config).items()}
    expected = set(hf.state_dict())
    missing, unknown = expected - set(weights), set(weights) - expected
    if missing or unknown:
        raise ValueError(f"CTranslate2 -> transformers mapping: missing {sorted(missing)[:5]}, "
                         f"unknown {sorted(unknown)[:5]}")
    hf.load_state_dict(weights, strict=True)
    hf.generation_config = generation_config(config, package_config, special)
    hf.eval()
    return hf, special
