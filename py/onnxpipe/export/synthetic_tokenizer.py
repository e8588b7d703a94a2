"""A byte-level BPE tokenizer of an exact vocabulary size, for the random-weight sized models.

The real tokenizers of Qwen2.5 and Llama 3 can't be had here; what decode speed and memory
depend on is the vocabulary size (the embedding and the logits), and what prompts cost is
how many tokens a text becomes. This builds a GPT-2 style byte-level BPE (the 256 byte
symbols, then merges of letter pairs and triples in a fixed order) with exactly ``tokens``
regular tokens, the model's own pre-tokenizer pattern, and its chat tokens at their real ids.
English text becomes about one token per 2.5 characters. Written as tokenizer.json and
tokenizer_config.json (with the chat template), which transformers, ``tokenizers``,
transformers.js and onnxpipe read; ``gguf_vocab`` gives llama.cpp the same vocabulary.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .sized_configs import SizedModel


def byte_symbols() -> list[str]:
    """GPT-2's printable stand-in for each byte (bytes_to_unicode), in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def merges_for(count: int) -> list[tuple[str, str]]:
    """``count`` merges: space + letter and letter pairs first (frequent English letters
    first), then every pair extended by one letter; each merge joins two tokens made earlier."""
    space = byte_symbols()[ord(" ")]
    letters = "etaoinsrhldcumfpgwybvkxjqz"
    alphabet = [space] + list(letters) + list(letters.upper())
    merges: list[tuple[str, str]] = []
    pairs = [(a, b) for a in alphabet for b in alphabet if b != space]
    merges.extend(pairs)
    level = [a + b for a, b in pairs]
    while len(merges) < count:
        nxt = []
        for token in level:
            for b in alphabet[1:]:
                merges.append((token, b))
                nxt.append(token + b)
                if len(merges) >= count:
                    return merges[:count]
        level = nxt
    return merges[:count]


def special_tokens(model: SizedModel) -> dict[int, str]:
    """id -> text of every special token: the named ones at their ids, reserved names elsewhere."""
    named = {i: t for t, i in model.special.items()}
    return {i: named.get(i, f"<|reserved_special_{i - model.tokens}|>")
            for i in range(model.tokens, model.tokens + model.special_count)}


def vocabulary(model: SizedModel) -> tuple[list[str], list[tuple[str, str]]]:
    """(token text by id for ids 0..tokens-1, merges)."""
    symbols = byte_symbols()
    merges = merges_for(model.tokens - len(symbols))
    tokens = symbols + [a + b for a, b in merges]
    if len(set(tokens)) != len(tokens):
        raise AssertionError("synthetic vocabulary has a duplicate token")
    return tokens, merges


def tokenizer_json(model: SizedModel) -> dict[str, Any]:
    tokens, merges = vocabulary(model)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in special_tokens(model).items()]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": model.split_pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": [[a, b] for a, b in merges]},
    }


def tokenizer_config(model: SizedModel) -> dict[str, Any]:
    specials = special_tokens(model)
    return {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model.config["max_position_embeddings"],
        "clean_up_tokenization_spaces": False, "chat_template": model.chat_template,
        "bos_token": model.bos, "eos_token": model.eos[0], "pad_token": model.pad, "unk_token": None,
        "added_tokens_decoder": {str(i): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                          "normalized": False, "single_word": False} for i, t in specials.items()},
    }


def write(model: SizedModel, out_dir: str) -> None:
    """tokenizer.json, tokenizer_config.json and chat_template.jinja into ``out_dir``."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(model), f, ensure_ascii=False)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(model), f, ensure_ascii=False, indent=1)
    with open(os.path.join(out_dir, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(model.chat_template)


def gguf_vocab(model: SizedModel) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) as llama.cpp's "gpt2" tokenizer keys hold them; ids past the
    tokenizer up to the embedding's rows are padding tokens, as llama.cpp's converter writes."""
    tokens, merges = vocabulary(model)
    types = [1] * len(tokens)   # NORMAL
    for i, text in special_tokens(model).items():
        tokens.append(text)
        types.append(3)   # CONTROL
    for i in range(len(tokens), model.config["vocab_size"]):
        tokens.append(f"[PAD{i}]")
        types.append(5)   # UNUSED
    return tokens, types, [f"{a} {b}" for a, b in merges]


def sample_text(n_chars: int) -> str:
    """Plain English-like text of about ``n_chars`` characters, the same on every run (prompts)."""
    words = ("the of and to in is was for on that with as by at from his her it an are this which "
             "be or have one had not but all were they their there been has more when who will "
             "would no out so up said what about into than them can only other time new some could "
             "these two may first then do any like my now over such our man me even most made after "
             "also did many before must through back years where much your way well down should "
             "because each just those people how too little state good very make world still own see "
             "men work long get here between both life being under never day same another know while "
             "last might us great old year off come since against go came right used take three").split()
    out, i = [], 0
    while sum(len(w) + 1 for w in out) < n_chars:
        out.append(words[(i * 7 + i // 5) % len(words)])
        i += 1
    text = " ".join(out)
    return text[0].upper() + text[1:] + "."


__all__ = ["byte_symbols", "gguf_vocab", "merges_for", "sample_text", "special_tokens",
           "tokenizer_config", "tokenizer_json", "vocabulary", "write"]
