"""IncrementalDetokenizer: streamed chunks concatenate to the one-shot decode, never split a character."""

from __future__ import annotations

import json
import random

import pytest

from onnxpipe.search.detokenize import IncrementalDetokenizer

TEXTS = [
    "Hello world! 😀🚀 你好世界 日本語のテキスト",
    "Family: 👨‍👩‍👧‍👦, flags: 🇫🇷🇯🇵, skin tone: 👍🏽, keycap: 1️⃣",
    "Ελληνικά русский العربية हिन्दी ünïcödé 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "  spaces\tand\nnewlines\r\n  ",
]
TRAIN = [
    "Hello world! This is a tiny tokenizer trained on a few sentences.",
    "The quick brown fox jumps over the lazy dog.",
    "Emoji like 😀 and 🚀 and CJK like 你好世界 and 日本語 are multi-byte characters.",
]


def stream(detok: IncrementalDetokenizer, ids) -> list[str]:
    chunks = [detok.push(i) for i in ids]
    chunks.append(detok.flush())
    return chunks


# --- a decoder with no tokenizer at all: ids are raw bytes ------------------------------------


def byte_decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def test_raw_bytes_exact_chunks() -> None:
    d = IncrementalDetokenizer(byte_decode)
    ids = list("a😀b".encode())  # 61 | F0 9F 98 80 | 62
    assert stream(d, ids) == ["a", "", "", "", "😀", "b", ""]
    assert d.text == "a😀b"


def test_flush_emits_incomplete_character() -> None:
    d = IncrementalDetokenizer(byte_decode)
    assert [d.push(i) for i in [0x41, 0xE4, 0xBD]] == ["A", "", ""]
    assert d.flush() == "\ufffd"
    assert d.text == "A\ufffd" == byte_decode([0x41, 0xE4, 0xBD])
    assert d.flush() == ""


def test_random_bytes_property() -> None:
    rng = random.Random(1234)
    alphabet = list(range(256))
    utf8_heavy = [0x41, 0x20, 0xC3, 0xA9, 0xE4, 0xBD, 0xA0, 0xF0, 0x9F, 0x98, 0x80, 0x80, 0xBF, 0xFF]
    for trial in range(2000):
        pool = alphabet if trial % 2 else utf8_heavy
        ids = [rng.choice(pool) for _ in range(rng.randint(0, 40))]
        d = IncrementalDetokenizer(byte_decode)
        chunks = stream(d, ids)
        assert "".join(chunks) == byte_decode(ids) == d.text, ids


def test_valid_text_never_yields_replacement_chars() -> None:
    for text in TEXTS:
        d = IncrementalDetokenizer(byte_decode)
        chunks = stream(d, list(text.encode()))
        assert "".join(chunks) == text
        assert all("\ufffd" not in c for c in chunks)


def test_window_stays_small() -> None:
    seen: list[int] = []

    def decode(ids: list[int]) -> str:
        seen.append(len(ids))
        return byte_decode(ids)

    text = "".join(TEXTS) * 50
    d = IncrementalDetokenizer(decode)
    out = "".join(stream(d, list(text.encode())))
    assert out == text
    assert max(seen) <= 8  # bounded by the longest character, not by the sequence
    assert len(seen) <= 2 * len(text.encode()) + 2


def test_skip_ids_are_dropped() -> None:
    d = IncrementalDetokenizer(byte_decode, skip_special_tokens_ids={0x00})
    ids = [0x48, 0x00, 0xE4, 0x00, 0xBD, 0xA0, 0x00]
    assert stream(d, ids) == ["H", "", "", "", "", "你", "", ""]
    assert "".join(d.push(t) for t in [0x00, 0x21, 0x00]) == "!"


# --- real tokenizers --------------------------------------------------------------------------

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402


@pytest.fixture(scope="module")
def bytelevel():
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TRAIN, trainer)
    return tok


@pytest.fixture(scope="module")
def bytefallback():
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator([s.encode("ascii", "ignore").decode() for s in TRAIN], trainer)
    data = json.loads(tok.to_str())
    for b in range(256):
        data["model"]["vocab"].setdefault(f"<0x{b:02X}>", len(data["model"]["vocab"]))
    data["model"]["byte_fallback"] = True
    data["decoder"] = json.loads(
        decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        ).__getstate__()
    )
    return tokenizers.Tokenizer.from_str(json.dumps(data))


def test_bytelevel_random_ids_property(bytelevel) -> None:
    rng = random.Random(7)
    n = bytelevel.get_vocab_size()
    specials = {0, 1, 2}
    decode = lambda ids: bytelevel.decode(ids, skip_special_tokens=False)  # noqa: E731
    for trial in range(600):
        ids = [rng.randrange(n) for _ in range(rng.randint(0, 30))]
        d = IncrementalDetokenizer(decode)
        assert "".join(stream(d, ids)) == decode(ids), ids
        d = IncrementalDetokenizer(decode, skip_special_tokens_ids=specials)
        assert "".join(stream(d, ids)) == bytelevel.decode(ids, skip_special_tokens=True), ids


def test_bytelevel_text_streams_whole_characters(bytelevel) -> None:
    decode = lambda ids: bytelevel.decode(ids, skip_special_tokens=False)  # noqa: E731
    for text in TEXTS + ["<|im_start|>assistant\n你好 😀<|im_end|>"]:
        ids = bytelevel.encode(text).ids
        d = IncrementalDetokenizer(decode)
        chunks = stream(d, ids)
        assert "".join(chunks) == decode(ids) == text
        assert all("\ufffd" not in c for c in chunks)
    ids = bytelevel.encode("🦊").ids  # shares a learned F0 9F prefix, then two byte tokens
    assert len(ids) == 3
    assert stream(IncrementalDetokenizer(decode), ids) == ["", "", "🦊", ""]
    ids = bytelevel.encode("😀").ids  # learned merges: two tokens, still one character out
    assert len(ids) == 2
    assert stream(IncrementalDetokenizer(decode), ids) == ["", "😀", ""]


def test_bytefallback_text_and_leading_space(bytefallback) -> None:
    decode = lambda ids: bytefallback.decode(ids, skip_special_tokens=False)  # noqa: E731
    rng = random.Random(3)
    words = TEXTS + ["Hello", "quick", "fox", "😀", "日本語", " ", "dog."]
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
        ids = bytefallback.encode(text).ids
        d = IncrementalDetokenizer(decode)
        chunks = stream(d, ids)
        assert "".join(chunks) == decode(ids), text
        assert all("\ufffd" not in c for c in chunks), text
    # the decoder strips the first token's leading space only; later words keep theirs
    ids = bytefallback.encode("Hello world").ids
    assert bytefallback.id_to_token(ids[0]).startswith("▁H")
    assert stream(IncrementalDetokenizer(decode), ids)[0] == decode(ids[:1]).lstrip() == decode(ids[:1])
    assert "".join(stream(IncrementalDetokenizer(decode), ids)) == "Hello world"


def test_skip_special_mid_stream_keeps_spaces(bytefallback) -> None:
    decode = lambda ids: bytefallback.decode(ids, skip_special_tokens=False)  # noqa: E731
    eos = bytefallback.token_to_id("</s>")
    ids = bytefallback.encode("Hello").ids + [eos] + bytefallback.encode("Hello world").ids
    d = IncrementalDetokenizer(decode, skip_special_tokens_ids={eos})
    assert "".join(stream(d, ids)) == bytefallback.decode(ids, skip_special_tokens=True)


def test_bytefallback_random_ids_exact_with_hold_ids(bytefallback) -> None:
    decode = lambda ids: bytefallback.decode(ids, skip_special_tokens=False)  # noqa: E731
    byte_ids = {bytefallback.token_to_id(f"<0x{b:02X}>") for b in range(256)}
    rng = random.Random(11)
    n = bytefallback.get_vocab_size()
    for _ in range(800):
        ids = [rng.randrange(n) for _ in range(rng.randint(0, 30))]
        d = IncrementalDetokenizer(decode, hold_ids=byte_ids)
        assert "".join(stream(d, ids)) == decode(ids), ids
    # without hold_ids a valid run followed by a stray byte re-renders the run: documented limit
    e_acute = [bytefallback.token_to_id("<0xC3>"), bytefallback.token_to_id("<0xA9>")]
    stray = bytefallback.token_to_id("<0xA9>")
    assert decode(e_acute) == "é" and decode(e_acute + [stray]) == "\ufffd" * 3
    assert "".join(stream(IncrementalDetokenizer(decode), e_acute + [stray])) == "é\ufffd\ufffd"
    held = IncrementalDetokenizer(decode, hold_ids=byte_ids)
    assert stream(held, e_acute + [stray]) == ["", "", "", "\ufffd" * 3]
