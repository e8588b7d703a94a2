"""The grammar engine's vocabulary read from tokenizer.json in pure Python (grammar/vocabulary.py)
against XGrammar's own reading and transformers': every tokenizer.json of the fixtures and the
public bundles, plus synthesized SentencePiece-style byte-fallback tokenizers (Prepend
normalizer, Metaspace pre-tokenizer in each prepend scheme, a Unigram model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxpipe.errors import BundleError
from onnxpipe.grammar.vocabulary import detect_metadata, encoded_vocab, read_vocabulary

xgr = pytest.importorskip("xgrammar")
ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(p for base in (ROOT / "tests/fixtures/.cache", ROOT / "public/models")
               for p in base.glob("*/tokenizer.json"))


def _xgrammar_metadata(text: str) -> tuple[str, bool]:
    meta = xgr.TokenizerInfo._detect_metadata_from_hf(text)
    return meta["vocab_type"].name, bool(meta["add_prefix_space"])


def _transformers_vocab(path: Path) -> list[str]:
    """token strings by id as XGrammar's from_huggingface builds them (get_vocab(), by id)."""
    from transformers import PreTrainedTokenizerFast

    vocab = PreTrainedTokenizerFast(tokenizer_file=str(path)).get_vocab()
    out = [""] * (max(vocab.values()) + 1)
    for token, i in vocab.items():
        out[i] = token
    return out


def _sentencepiece_like(kind: str) -> str:
    """tokenizer.json text of a small byte-fallback tokenizer laid out as converted SentencePiece
    models are (llama-2: Prepend + Replace normalizer; newer: Metaspace pre-tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
             ["\u2581", "\u2581the", "\u2581a", "he", "llo", "\u2581hello", "{", "}", "\"", ":", "\u2581\"", "a", "b"]
    if kind == "unigram":
        tok = Tokenizer(models.Unigram([(p, -float(i)) for i, p in enumerate(pieces)], unk_id=0, byte_fallback=True))
    else:
        tok = Tokenizer(models.BPE({p: i for i, p in enumerate(pieces)}, [], byte_fallback=True, unk_token="<unk>",
                                   fuse_unk=True))
    fallback = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                  decoders.Strip(" ", 1, 0)])
    if kind in ("prepend", "unigram"):
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = fallback
    else:   # metaspace-always / -first / -never
        scheme = kind.split("-")[1]
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme)
        tok.decoder = fallback if scheme != "never" else decoders.Metaspace(replacement="\u2581",
                                                                            prepend_scheme=scheme)
    return tok.to_str()


SYNTHESIZED = ["prepend", "unigram", "metaspace-always", "metaspace-first", "metaspace-never"]


def test_the_files_are_there():
    names = {p.parent.name for p in FILES}
    assert {"smollm2-135m-instruct", "torch_llama", "genai_qwen2"} <= names, names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name)
def test_metadata_and_tokens_match_xgrammar_and_transformers(path):
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert detect_metadata(data) == _xgrammar_metadata(text)
    ours = encoded_vocab(data, str(path))
    assert ours == _transformers_vocab(path)


@pytest.mark.parametrize("kind", SYNTHESIZED)
def test_sentencepiece_style_metadata_matches_xgrammar(kind, tmp_path):
    text = _sentencepiece_like(kind)
    data = json.loads(text)
    vocab_type, prefix = detect_metadata(data)
    assert (vocab_type, prefix) == _xgrammar_metadata(text)
    assert prefix == (kind not in ("metaspace-never",))
    assert vocab_type == ("RAW" if kind == "metaspace-never" else "BYTE_FALLBACK")
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    assert encoded_vocab(data, str(path)) == _transformers_vocab(path)


@pytest.mark.parametrize("kind", ["smollm2", "prepend", "unigram"])
def test_the_engine_decodes_the_tokens_as_from_huggingface_does(kind, tmp_path):
    """The TokenizerInfo built from our reading decodes every token to the same bytes as the one
    XGrammar builds from the transformers tokenizer."""
    from transformers import PreTrainedTokenizerFast

    if kind == "smollm2":
        path = ROOT / "public/models/smollm2-135m-instruct/tokenizer.json"
        if not path.exists():
            pytest.skip("public/models/smollm2-135m-instruct is not built (make models)")
    else:
        path = tmp_path / "tokenizer.json"
        path.write_text(_sentencepiece_like(kind), encoding="utf-8")
    vocab = read_vocabulary(str(path), None, [2])
    ours = xgr.TokenizerInfo(list(vocab.encoded), getattr(xgr.VocabType, vocab.vocab_type),
                             vocab_size=vocab.vocab_size, stop_token_ids=list(vocab.stop_ids),
                             add_prefix_space=vocab.add_prefix_space)
    theirs = xgr.TokenizerInfo.from_huggingface(PreTrainedTokenizerFast(tokenizer_file=str(path)),
                                                vocab_size=vocab.vocab_size, stop_token_ids=[2])
    assert (ours.vocab_type, ours.add_prefix_space) == (theirs.vocab_type, theirs.add_prefix_space)
    assert ours.decoded_vocab == theirs.decoded_vocab


def test_read_vocabulary_fits_the_logits_width(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(_sentencepiece_like("prepend"), encoding="utf-8")
    n = len(encoded_vocab(json.loads(path.read_text()), str(path)))
    wide = read_vocabulary(str(path), n + 30, [2, 7, n + 29, n + 30, -1])
    assert (wide.vocab_size, len(wide.encoded), wide.stop_ids) == (n + 30, n, (2, 7, n + 29))
    narrow = read_vocabulary(str(path), n - 5, [2, n - 1])
    assert (narrow.vocab_size, len(narrow.encoded), narrow.stop_ids) == (n - 5, n - 5, (2,))
    same = read_vocabulary(str(path), None, [2])
    assert same.vocab_size == n and same.vocab_type == "BYTE_FALLBACK" and same.add_prefix_space
    assert json.loads(same.to_json())["encoded"] == list(same.encoded)


def test_added_tokens_fill_their_ids_and_gaps_stay_empty():
    data = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}, "added_tokens": [{"content": "<x>", "id": 4}]}
    assert encoded_vocab(data, "t.json") == ["a", "b", "", "", "<x>"]
    assert detect_metadata(data) == ("RAW", False)


def test_unreadable_tokenizers_name_the_file(tmp_path):
    with pytest.raises(BundleError, match="model.vocab: expected an object or a list"):
        encoded_vocab({"model": {"type": "BPE"}}, "t.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(BundleError, match=r"tokenizer\.json: cannot read the tokenizer"):
        read_vocabulary(str(bad), None, [])
    with pytest.raises(BundleError, match="cannot read"):
        read_vocabulary(str(tmp_path / "missing.json"), None, [])
