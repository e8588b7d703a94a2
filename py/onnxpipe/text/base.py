"""The text-processor interface and the pure-Python parts every implementation shares.

A text processor turns chat messages into prompt text (chat template) and text into token ids
and back. The native implementation (`native.py`) wraps the `tokenizers` library; the browser
one wraps `@huggingface/tokenizers` through the FFI. Both read the same bundle files, so the
config parsing below lives here, free of any tokenizer dependency.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from onnxpipe.errors import BundleError, OnnxpipeError

# pipeline.json location of the text spec, used in error messages.
SPEC_PATH = "preprocessing.text"
SPEC_KEYS = ("tokenizer", "config", "chat_template")
OTHER_SPEC_KEYS = ("tool_calls",)   # read by grammar/tools.py, not files
DEFAULT_FILES = {
    "tokenizer": "tokenizer.json",
    "config": "tokenizer_config.json",
    "chat_template": "chat_template.jinja",
}
# The named special tokens transformers passes to chat templates (in this order).
NAMED_SPECIAL_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


class TextError(OnnxpipeError, ValueError):
    """A tokenizer or chat-template problem; `kind` survives the worker boundary."""

    kind = "text"


class TextFileError(TextError, BundleError):
    """A tokenizer file the bundle lacks (named by preprocessing.text or a default)."""

    kind = "bundle"


@runtime_checkable
class TextProcessor(Protocol):
    """What the runtime needs from a tokenizer + chat template, whatever implements it."""

    has_chat_template: bool  # the bundle declares a chat template
    special_token_ids: frozenset[int]  # ids that decode(skip_special_tokens=True) drops
    vocab_size: int  # number of ids, added tokens included (len(tokenizer) in transformers)
    eos_token_ids: tuple[int, ...]  # the config's eos_token as ids; () when it declares none

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids for `text`; `add_special_tokens` applies the tokenizer's post-processor."""
        ...

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """Text for `ids`, exactly as transformers' tokenizer.decode gives it."""
        ...

    def chat_template_source(self, tools: bool = False) -> str | None:
        """The text of the chat template rendered with tools (``tools``) or without; None without one."""
        ...

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The prompt text for `messages` (not tokenized), as transformers renders it."""
        ...

    def token_to_id(self, token: str) -> int | None:
        """The id of one token string, or None when the vocabulary lacks it."""
        ...


def special_token_content(value: Any) -> str | None:
    """A special-token value from tokenizer_config.json as a string.

    Configs store them as plain strings or as serialized AddedTokens ({"content": ...}).
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    raise TextError(f"special token must be a string or an object with 'content'; got {value!r}")


@dataclass(frozen=True)
class AddedTokenSpec:
    """One added token a config declares, as plain data."""

    content: str
    special: bool = True
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False


@dataclass(frozen=True)
class TokenizerConfig:
    """The parts of tokenizer_config.json the runtime uses."""

    # named special tokens (bos_token, eos_token, ..., then model-specific ones like image_token)
    special_tokens: dict[str, str] = field(default_factory=dict)
    # extra_special_tokens / additional_special_tokens
    extra_special_tokens: tuple[AddedTokenSpec, ...] = ()
    # added_tokens_decoder entries, by id
    added_tokens: dict[int, AddedTokenSpec] = field(default_factory=dict)
    # a single template, a {name: template} dict, or None
    chat_template: str | dict[str, str] | None = None
    # transformers' decode post-processing (never applied to BPE models)
    clean_up_tokenization_spaces: bool = False
    # encode special-token text as ordinary text
    split_special_tokens: bool = False


def _added_token(value: Any, special: bool) -> AddedTokenSpec:
    if isinstance(value, str):
        return AddedTokenSpec(content=value, special=special)
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return AddedTokenSpec(
            content=value["content"],
            special=bool(value.get("special", special)),
            single_word=bool(value.get("single_word", False)),
            lstrip=bool(value.get("lstrip", False)),
            rstrip=bool(value.get("rstrip", False)),
            normalized=bool(value.get("normalized", not special)),
        )
    raise TextError(f"added token must be a string or an object with 'content'; got {value!r}")


def _chat_template_value(value: Any, where: str) -> str | dict[str, str] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):  # [{"name": ..., "template": ...}, ...]
        try:
            return {str(item["name"]): str(item["template"]) for item in value}
        except (TypeError, KeyError) as exc:
            raise TextError(f"{where}: chat_template list entries need 'name' and 'template'") from exc
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    raise TextError(f"{where}: chat_template must be a string or a list of named templates")


def parse_tokenizer_config(
    data: Mapping[str, Any], special_tokens_map: Mapping[str, Any] | None = None, where: str = "tokenizer_config.json"
) -> TokenizerConfig:
    """Parse tokenizer_config.json (and a legacy special_tokens_map.json) the way transformers reads them.

    Like transformers, special_tokens_map.json only counts when the config has no added_tokens_decoder,
    and then its values override the config's.
    """
    if not isinstance(data, Mapping):
        raise TextError(f"{where}: expected a JSON object, got {type(data).__name__}")
    merged: dict[str, Any] = dict(data)
    if special_tokens_map and "added_tokens_decoder" not in data:
        merged.update(special_tokens_map)
    special = {}
    for name in NAMED_SPECIAL_TOKENS:
        content = special_token_content(merged.get(name))
        if content is not None:
            special[name] = content
    extras_raw = merged.get("extra_special_tokens")
    if extras_raw is None:
        extras_raw = merged.get("additional_special_tokens")
    if isinstance(extras_raw, Mapping):  # model-specific named tokens: {"image_token": "<image>"}
        for name, value in extras_raw.items():
            content = special_token_content(value)
            if content is not None:
                special.setdefault(str(name), content)
        extras_raw = list(extras_raw.values())
    extras = tuple(_added_token(v, special=True) for v in (extras_raw or []))
    added = {}
    for idx, value in (merged.get("added_tokens_decoder") or {}).items():
        added[int(idx)] = _added_token(value, special=False)
    return TokenizerConfig(
        special_tokens=special,
        extra_special_tokens=extras,
        added_tokens=added,
        chat_template=_chat_template_value(merged.get("chat_template"), where),
        clean_up_tokenization_spaces=bool(merged.get("clean_up_tokenization_spaces", False)),
        split_special_tokens=bool(merged.get("split_special_tokens", False)),
    )


def clean_up_tokenization(text: str) -> str:
    """transformers' clean_up_tokenization (meant for WordPiece-style outputs)."""
    return (
        text.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
    )


@dataclass(frozen=True)
class TextFiles:
    """The bundle files a text processor reads; None where an optional default is absent."""

    tokenizer: str
    config: str | None
    chat_template: str | None
    special_tokens_map: str | None


def _spec_get(spec: Any, key: str) -> Any:
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        return spec.get(key)
    return getattr(spec, key, None)


def resolve_text_files(bundle_dir: str | os.PathLike[str], spec: Any = None) -> TextFiles:
    """Resolve `preprocessing.text` against a bundle folder, checking that the files exist.

    `spec` is the JSON object (or an object with the same attribute names); every key is
    optional. A file the spec names must exist; a default that is absent is skipped, except
    the tokenizer, which is required.
    """
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(SPEC_KEYS) - set(OTHER_SPEC_KEYS))
        if unknown:
            raise TextError(
                f"{SPEC_PATH}: unknown key(s) {', '.join(map(repr, unknown))}; valid keys: {', '.join(SPEC_KEYS + OTHER_SPEC_KEYS)}"
            )
    root = os.fspath(bundle_dir)
    found: dict[str, str | None] = {}
    for key in SPEC_KEYS:
        named = _spec_get(spec, key)
        if named is not None and not isinstance(named, str):
            raise TextError(f"{SPEC_PATH}.{key}: expected a file name (string), got {named!r}")
        path = os.path.join(root, named if named is not None else DEFAULT_FILES[key])
        if os.path.isfile(path):
            found[key] = path
        elif named is not None or key == "tokenizer":
            how = f"named by {SPEC_PATH}.{key}" if named is not None else f"the default for {SPEC_PATH}.{key}"
            raise TextFileError(f"{key} file not found: {path} ({how}); set {SPEC_PATH}.{key} to a file in the bundle")
        else:
            found[key] = None
    stm = os.path.join(os.path.dirname(found["tokenizer"] or root), "special_tokens_map.json")
    return TextFiles(
        tokenizer=found["tokenizer"],  # type: ignore[arg-type]
        config=found["config"],
        chat_template=found["chat_template"],
        special_tokens_map=stm if os.path.isfile(stm) else None,
    )


def read_json(path: str) -> Any:
    """Read a JSON file, turning parse errors into a TextError that names the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise TextError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
