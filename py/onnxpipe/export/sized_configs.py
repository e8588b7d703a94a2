"""The architectures of the models people run in the browser, as Hugging Face configs.

Real weights of these sizes can't be had here, but decode speed, memory and loading depend on
the shapes, not the values: ``sized_models.py`` fills these exact configs with seeded random
weights. Each entry is the model's published config.json (the fields transformers reads) plus
the ids of its chat tokens; ``layers`` may be cut for the small test versions (same widths).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ChatML (Qwen2.5) and Llama 3's header template, written for the synthetic tokenizers' ids.
QWEN_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")

# The pre-tokenizer patterns of the real tokenizers (Qwen2: one digit per token; Llama 3: up to three).
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class SizedModel:
    name: str                     # build/sized/<name>/
    source: str                   # the model whose config this is
    config: dict[str, Any]        # config.json as published (transformers' fields)
    tokens: int                   # regular (merged) tokens of its tokenizer, ids 0..tokens-1
    special: dict[str, int]       # special token -> id (the chat tokens at their real ids)
    special_count: int            # ids tokens..tokens+special_count-1 are special
    bos: str | None
    eos: tuple[str, ...]
    pad: str | None
    chat_template: str
    split_pattern: str
    gguf_pre: str                 # llama.cpp's name of the pre-tokenizer
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def arch(self) -> str:
        return self.config["model_type"]

    def small(self, layers: int | None, vocab: int | None = None) -> "SizedModel":
        """The same widths with ``layers`` decoder layers and, given ``vocab``, a vocabulary of
        that many ids (the chat tokens moved to its end): a small test version."""
        if layers is None and vocab is None:
            return self
        layers = layers or self.config["num_hidden_layers"]
        config = dict(self.config, num_hidden_layers=layers)
        if "max_window_layers" in config:
            config["max_window_layers"] = min(config["max_window_layers"], layers)
        name, tokens, special = f"{self.name}-{layers}l", self.tokens, dict(self.special)
        if vocab is not None:
            if vocab < 300 + self.special_count:
                raise SystemExit(f"--vocab {vocab}: a small version needs at least {300 + self.special_count} ids")
            tokens = vocab - self.special_count
            special = {t: i - self.tokens + tokens for t, i in self.special.items()}
            config["vocab_size"] = vocab
            for key in ("bos_token_id", "eos_token_id"):
                ids = config.get(key)
                config[key] = ([i - self.tokens + tokens for i in ids] if isinstance(ids, list)
                               else ids - self.tokens + tokens if isinstance(ids, int) else ids)
            name += f"-v{vocab}"
        return SizedModel(name, self.source, config, tokens, special, self.special_count, self.bos, self.eos,
                          self.pad, self.chat_template, self.split_pattern, self.gguf_pre, self.extra)


def _qwen2(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int) -> dict[str, Any]:
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "max_position_embeddings": 32768,
        "max_window_layers": layers, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "sliding_window": None,
        "use_sliding_window": False, "tie_word_embeddings": True, "vocab_size": 151936,
        "initializer_range": 0.02, "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
        "use_cache": True,
    }


_QWEN_TOKENS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
_LLAMA3_TOKENS = {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|start_header_id|>": 128006,
                  "<|end_header_id|>": 128007, "<|eom_id|>": 128008, "<|eot_id|>": 128009}


def _qwen(name: str, source: str, *shape: int) -> SizedModel:
    return SizedModel(name, source, _qwen2(*shape), tokens=151643, special=_QWEN_TOKENS, special_count=22,
                      bos=None, eos=("<|im_end|>", "<|endoftext|>"), pad="<|endoftext|>",
                      chat_template=QWEN_TEMPLATE, split_pattern=QWEN_SPLIT, gguf_pre="qwen2")


MODELS: dict[str, SizedModel] = {m.name: m for m in (
    _qwen("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct", 896, 4864, 24, 14, 2),
    SizedModel(
        "llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct",
        {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
         "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
         "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                  "high_freq_factor": 4.0,
                                                  "original_max_position_embeddings": 8192},
         "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True, "vocab_size": 128256,
         "initializer_range": 0.02, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
         "use_cache": True},
        tokens=128000, special=_LLAMA3_TOKENS, special_count=256, bos="<|begin_of_text|>",
        eos=("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"), pad=None, chat_template=LLAMA3_TEMPLATE,
        split_pattern=LLAMA3_SPLIT, gguf_pre="llama-bpe"),
    _qwen("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", 1536, 8960, 28, 12, 2),
    _qwen("qwen2.5-3b", "Qwen/Qwen2.5-3B-Instruct", 2048, 11008, 36, 16, 2),
)}
# What `make sized-models` builds (3B only on request: its fp32 export needs ~40 GB of memory).
DEFAULT_NAMES = ("qwen2.5-0.5b", "llama-3.2-1b", "qwen2.5-1.5b")


def get(name: str) -> SizedModel:
    if name not in MODELS:
        raise SystemExit(f'unknown sized model "{name}"; choose from {", ".join(MODELS)}')
    return MODELS[name]


def head_dim(config: dict[str, Any]) -> int:
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def parameter_count(config: dict[str, Any]) -> int:
    """Weights of the decoder (the embedding once when tied)."""
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    q = config["num_attention_heads"] * head_dim(config)
    kv = config["num_key_value_heads"] * head_dim(config)
    bias = (q + 2 * kv) if config["model_type"] == "qwen2" else 0
    per_layer = h * q + 2 * h * kv + q * h + bias + 3 * h * i + 2 * h
    embed = config["vocab_size"] * h
    return embed * (1 if config.get("tie_word_embeddings") else 2) + layers * per_layer + h
