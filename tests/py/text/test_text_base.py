"""Pure-Python parts of the text layer: config parsing and bundle file resolution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxpipe.errors import BundleError
from onnxpipe.text.base import (
    TextError,
    clean_up_tokenization,
    parse_tokenizer_config,
    resolve_text_files,
    special_token_content,
)


def test_special_token_content() -> None:
    assert special_token_content("<s>") == "<s>"
    assert special_token_content({"__type": "AddedToken", "content": "</s>", "lstrip": False}) == "</s>"
    assert special_token_content(None) is None
    with pytest.raises(TextError, match="special token") as info:
        special_token_content(5)
    assert info.value.kind == "text" and info.value.to_dict()["kind"] == "text"


def test_parse_config_tokens_and_templates() -> None:
    cfg = parse_tokenizer_config(
        {
            "eos_token": {"content": "<|im_end|>", "special": True},
            "bos_token": "<|im_start|>",
            "pad_token": None,
            "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}],
            "additional_special_tokens": ["<a>", {"content": "<b>", "special": True}],
            "added_tokens_decoder": {"7": {"content": "<x>", "special": False, "normalized": True}},
            "clean_up_tokenization_spaces": True,
        }
    )
    assert cfg.special_tokens == {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    assert list(cfg.special_tokens) == ["bos_token", "eos_token"]  # transformers' order
    assert cfg.chat_template == {"default": "D", "tool_use": "T"}
    assert [t.content for t in cfg.extra_special_tokens] == ["<a>", "<b>"]
    assert cfg.added_tokens[7].content == "<x>" and not cfg.added_tokens[7].special and cfg.added_tokens[7].normalized
    assert cfg.clean_up_tokenization_spaces and not cfg.split_special_tokens


def test_model_specific_tokens_become_template_variables() -> None:
    cfg = parse_tokenizer_config({"eos_token": "</s>", "extra_special_tokens": {"image_token": "<image>"}})
    assert cfg.special_tokens == {"eos_token": "</s>", "image_token": "<image>"}


def test_special_tokens_map_applies_only_without_added_tokens_decoder() -> None:
    stm = {"eos_token": "<eot>"}
    assert parse_tokenizer_config({"eos_token": "</s>"}, stm).special_tokens["eos_token"] == "<eot>"
    with_decoder = {"eos_token": "</s>", "added_tokens_decoder": {}}
    assert parse_tokenizer_config(with_decoder, stm).special_tokens["eos_token"] == "</s>"


def test_bad_config_shapes() -> None:
    with pytest.raises(TextError, match="cfg.json: expected a JSON object"):
        parse_tokenizer_config([], where="cfg.json")  # type: ignore[arg-type]
    with pytest.raises(TextError, match="'name' and 'template'"):
        parse_tokenizer_config({"chat_template": [{"template": "x"}]})


def test_resolve_defaults_and_missing(tmp_path: Path) -> None:
    with pytest.raises(TextError) as info:
        resolve_text_files(tmp_path)
    assert info.value.kind == "bundle" and isinstance(info.value, BundleError)
    assert str(info.value) == (
        f"tokenizer file not found: {tmp_path / 'tokenizer.json'} (the default for preprocessing.text.tokenizer); "
        "set preprocessing.text.tokenizer to a file in the bundle"
    )
    (tmp_path / "tokenizer.json").write_text("{}")
    files = resolve_text_files(tmp_path, None)
    assert files.tokenizer == str(tmp_path / "tokenizer.json")
    assert files.config is None and files.chat_template is None and files.special_tokens_map is None
    (tmp_path / "tokenizer_config.json").write_text("{}")
    (tmp_path / "chat_template.jinja").write_text("")
    (tmp_path / "special_tokens_map.json").write_text("{}")
    files = resolve_text_files(tmp_path, {})
    assert files.config == str(tmp_path / "tokenizer_config.json")
    assert files.chat_template == str(tmp_path / "chat_template.jinja")
    assert files.special_tokens_map == str(tmp_path / "special_tokens_map.json")


def test_resolve_named_files(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text("{}")
    with pytest.raises(TextError) as info:
        resolve_text_files(tmp_path, {"tokenizer": "t.json", "chat_template": "missing.jinja"})
    assert f"chat_template file not found: {tmp_path / 'missing.jinja'} (named by preprocessing.text.chat_template)" in str(
        info.value
    )
    with pytest.raises(TextError, match=r"unknown key\(s\) 'tokeniser'; valid keys: tokenizer, config, chat_template"):
        resolve_text_files(tmp_path, {"tokeniser": "t.json"})
    with pytest.raises(TextError, match=r"preprocessing\.text\.config: expected a file name"):
        resolve_text_files(tmp_path, {"tokenizer": "t.json", "config": 3})

    class Spec:  # a config-layer dataclass with the same field names also works
        tokenizer = "t.json"
        config = None
        chat_template = None

    assert resolve_text_files(tmp_path, Spec()).tokenizer == str(tmp_path / "t.json")


def test_read_json_error_names_file(tmp_path: Path) -> None:
    from onnxpipe.text.base import read_json

    bad = tmp_path / "tokenizer_config.json"
    bad.write_text('{"a": }')
    with pytest.raises(TextError, match=rf"{bad}: invalid JSON at line 1 column 7"):
        read_json(str(bad))
    bad.write_text(json.dumps({"a": 1}))
    assert read_json(str(bad)) == {"a": 1}


def test_clean_up_tokenization() -> None:
    assert clean_up_tokenization("do n't , go . it 's") == "don't, go. it's"
