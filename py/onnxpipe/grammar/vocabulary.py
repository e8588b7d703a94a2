"""The vocabulary a grammar engine needs, read from the bundle's tokenizer.json in pure Python.

XGrammar matches grammars against each token's text, so it takes the token strings in their
encoded form (``Ġhello`` for byte-level BPE, ``<0x41>`` / ``▁hello`` for byte-fallback
SentencePiece), how to decode them (``vocab_type``), whether the tokenizer adds a leading space,
the logits' width and the ids that end a generation. Reading them here, not in the engine,
means the native and the browser engine get the very same inputs (so the same masks), and the
browser can keep the result next to the bundle.

``vocab_type`` / ``add_prefix_space`` follow XGrammar's own detection from tokenizer.json
(``TokenizerInfo._detect_metadata_from_hf``; tests/py/grammar/test_vocabulary.py compares them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import BundleError

VOCAB_TYPES = ("RAW", "BYTE_FALLBACK", "BYTE_LEVEL")


@dataclass(frozen=True)
class GrammarVocabulary:
    encoded: tuple[str, ...]   # token id -> its string in tokenizer.json ("" for ids it lacks)
    vocab_type: str            # one of VOCAB_TYPES
    add_prefix_space: bool
    vocab_size: int            # the logits' width (>= len(encoded))
    stop_ids: tuple[int, ...]  # ids that end a generation once the grammar is complete

    def to_json(self) -> str:
        return json.dumps({"encoded": list(self.encoded), "vocab_type": self.vocab_type,
                           "add_prefix_space": self.add_prefix_space, "vocab_size": self.vocab_size,
                           "stop_ids": list(self.stop_ids)}, ensure_ascii=False)


def _types(node) -> list[str]:
    """The component types of a decoder / normalizer / pre-tokenizer (a Sequence flattened)."""
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        out = []
        for part in node.get("decoders") or node.get("normalizers") or node.get("pretokenizers") or []:
            out += _types(part)
        return out
    return [node.get("type")]


def _parts(node) -> list[dict]:
    if not isinstance(node, dict):
        return []
    if node.get("type") == "Sequence":
        out = []
        for part in node.get("decoders") or node.get("normalizers") or node.get("pretokenizers") or []:
            out += _parts(part)
        return out
    return [node]


def detect_metadata(tokenizer: dict) -> tuple[str, bool]:
    """(vocab_type, add_prefix_space) for a parsed tokenizer.json."""
    decoder = _types(tokenizer.get("decoder"))
    if "ByteLevel" in decoder:
        vocab_type = "BYTE_LEVEL"
    elif "ByteFallback" in decoder:
        vocab_type = "BYTE_FALLBACK"
    else:
        vocab_type = "RAW"
    prefix = False
    for part in _parts(tokenizer.get("normalizer")):
        if part.get("type") == "Prepend" and part.get("prepend") == "\u2581":
            prefix = True
    for part in _parts(tokenizer.get("pre_tokenizer")):
        if part.get("type") == "Metaspace" and (part.get("add_prefix_space") is True or
                                                 part.get("prepend_scheme") in ("always", "first")):
            prefix = True
    return vocab_type, prefix


def encoded_vocab(tokenizer: dict, where: str) -> list[str]:
    """Token strings by id: the model's vocabulary plus the added tokens."""
    model = tokenizer.get("model") or {}
    vocab = model.get("vocab")
    pairs: list[tuple[str, int]]
    if isinstance(vocab, dict):               # BPE, WordPiece, WordLevel
        pairs = [(token, int(i)) for token, i in vocab.items()]
    elif isinstance(vocab, list):             # Unigram: [[piece, score], ...] in id order
        pairs = [(entry[0], i) for i, entry in enumerate(vocab)]
    else:
        raise BundleError(f"{where}: model.vocab: expected an object or a list of pieces; the grammar "
                          f"engine needs the token strings")
    pairs += [(a["content"], int(a["id"])) for a in tokenizer.get("added_tokens") or []]
    size = max((i for _, i in pairs), default=-1) + 1
    out = [""] * size
    for token, i in pairs:
        if i >= 0:
            out[i] = token
    return out


@dataclass(frozen=True)
class VocabularySource:
    """Where a bundle's GrammarVocabulary comes from; calling it reads it. An engine module may
    define ``load_vocabulary(source)`` to keep the result (the browser keeps it next to the
    bundle, named by ``bundle_path`` and ``inputs``)."""
    tokenizer_file: str
    bundle_path: str               # tokenizer_file relative to the bundle folder
    vocab_size: int | None
    stop_ids: tuple[int, ...]

    def __call__(self) -> GrammarVocabulary:
        return read_vocabulary(self.tokenizer_file, self.vocab_size, self.stop_ids)

    @property
    def inputs(self) -> str:
        """What the vocabulary depends on besides the file: a file-name-safe key."""
        return f"v{FORMAT}-{self.vocab_size or 0}-" + "_".join(str(i) for i in sorted(self.stop_ids))

    @staticmethod
    def from_json(text: str) -> GrammarVocabulary:
        data = json.loads(text)
        return GrammarVocabulary(tuple(data["encoded"]), data["vocab_type"], bool(data["add_prefix_space"]),
                                 int(data["vocab_size"]), tuple(int(i) for i in data["stop_ids"]))


FORMAT = 1   # of GrammarVocabulary.to_json(): raise it when what read_vocabulary makes changes


def read_vocabulary(tokenizer_file: str, vocab_size: int | None, stop_ids) -> GrammarVocabulary:
    """The GrammarVocabulary of a bundle's tokenizer.json for logits ``vocab_size`` wide."""
    try:
        with open(tokenizer_file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise BundleError(f"{tokenizer_file}: cannot read the tokenizer for the grammar engine: {exc}") from None
    encoded = encoded_vocab(data, tokenizer_file)
    vocab_type, prefix = detect_metadata(data)
    size = max(vocab_size or 0, len(encoded))
    if vocab_size is not None and len(encoded) > vocab_size:   # ids past the logits can't be picked
        encoded = encoded[:vocab_size]
        size = vocab_size
    stops = tuple(sorted({int(i) for i in stop_ids if 0 <= int(i) < size}))
    return GrammarVocabulary(tuple(encoded), vocab_type, prefix, size, stops)
