"""The native text processor: the `tokenizers` library plus a jinja2 chat template.

It loads a bundle's tokenizer files the way transformers' AutoTokenizer loads a folder with a
tokenizer.json (its TokenizersBackend), so ids, decoded text and prompt text match it.
"""

from __future__ import annotations

import os
from typing import Any

from tokenizers import AddedToken, Tokenizer

from onnxpipe.text.base import (
    SPEC_PATH,
    AddedTokenSpec,
    TextError,
    TokenizerConfig,
    clean_up_tokenization,
    parse_tokenizer_config,
    read_json,
    resolve_text_files,
)
from onnxpipe.text.chat_template import ChatTemplate, select_template


def _added_token(spec: AddedTokenSpec) -> AddedToken:
    return AddedToken(
        spec.content,
        single_word=spec.single_word,
        lstrip=spec.lstrip,
        rstrip=spec.rstrip,
        normalized=spec.normalized,
        special=spec.special,
    )


def _same_added(token: Any, spec: AddedTokenSpec) -> bool:
    return (token.content, token.special, token.single_word, token.lstrip, token.rstrip, token.normalized) == (
        spec.content,
        spec.special,
        spec.single_word,
        spec.lstrip,
        spec.rstrip,
        spec.normalized,
    )


def _add_config_tokens(tokenizer: Tokenizer, config: TokenizerConfig) -> None:
    # transformers adds the config's added tokens, then any named or extra special token that is
    # not yet an added token (even when the base vocabulary has it, which makes it split out).
    existing = list(tokenizer.get_added_tokens_decoder().values())
    to_add: list[AddedTokenSpec] = []
    for _, spec in sorted(config.added_tokens.items()):
        if not any(_same_added(tok, spec) for tok in existing):
            to_add.append(spec)
    known = {tok.content for tok in existing} | {spec.content for spec in to_add}
    named = [AddedTokenSpec(content=c, special=True) for c in config.special_tokens.values()]
    for spec in [*named, *config.extra_special_tokens]:
        if spec.content not in known:
            to_add.append(spec)
            known.add(spec.content)
    for spec in to_add:
        if spec.special:
            tokenizer.add_special_tokens([_added_token(spec)])
        else:
            tokenizer.add_tokens([_added_token(spec)])


class NativeTextProcessor:
    """A `TextProcessor` over a `tokenizers.Tokenizer` and an optional chat template."""

    def __init__(self, tokenizer: Tokenizer, config: TokenizerConfig, template: ChatTemplate | None = None,
                 tool_template: ChatTemplate | None = None):
        """``tool_template``: the one rendered when tools are given (tokenizer_config.json's
        named ``tool_use`` template, as transformers picks it); None: ``template``."""
        self._tokenizer = tokenizer
        self._config = config
        self._template = template
        self._tool_template = tool_template
        self._templates: dict[str, ChatTemplate] = {}
        # encode/decode single sequences: padding or truncation baked into tokenizer.json must not apply
        tokenizer.no_padding()
        tokenizer.no_truncation()
        tokenizer.encode_special_tokens = config.split_special_tokens
        self.special_token_ids = frozenset(i for i, tok in tokenizer.get_added_tokens_decoder().items() if tok.special)
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        eos = config.special_tokens.get("eos_token")
        eos_id = tokenizer.token_to_id(eos) if eos is not None else None
        self.eos_token_ids: tuple[int, ...] = (eos_id,) if eos_id is not None else ()
        bos = config.special_tokens.get("bos_token")
        self.bos_token_id: int | None = tokenizer.token_to_id(bos) if bos is not None else None
        # transformers skips the cleanup for BPE models, where it would corrupt text
        self._clean_up = config.clean_up_tokenization_spaces and type(tokenizer.model).__name__ != "BPE"

    @property
    def has_chat_template(self) -> bool:
        return self._template is not None

    def chat_template_source(self, tools: bool = False) -> str | None:
        """The text of the template rendered (with tools or without); None without one."""
        template = (self._tool_template or self._template) if tools else self._template
        return template.source if template is not None else None

    @property
    def special_tokens(self) -> dict[str, str]:
        """Named special tokens (bos_token, eos_token, ...) from the config."""
        return dict(self._config.special_tokens)

    @property
    def byte_fallback_ids(self) -> frozenset[int]:
        """Ids of byte-fallback tokens (<0x00>..<0xFF>); empty unless the model uses byte fallback.

        Pass them as IncrementalDetokenizer(hold_ids=...) for exact streaming of invalid UTF-8.
        """
        if not getattr(self._tokenizer.model, "byte_fallback", False):
            return frozenset()
        ids = (self._tokenizer.token_to_id(f"<0x{b:02X}>") for b in range(256))
        return frozenset(i for i in ids if i is not None)

    @property
    def tokenizer(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer`."""
        return self._tokenizer

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        text = self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return clean_up_tokenization(text) if self._clean_up else text

    def token_to_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def apply_chat_template(
        self,
        messages: list[dict],
        add_generation_prompt: bool = True,
        tools: list[dict] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text for `messages`; extra keyword arguments become template variables."""
        if self._template is None:
            raise TextError(
                "this bundle has no chat template (no chat_template.jinja and no chat_template in "
                f"tokenizer_config.json); set {SPEC_PATH}.chat_template or pass a plain prompt"
            )
        template = self._tool_template if tools is not None and self._tool_template is not None else self._template
        return template.render(messages, add_generation_prompt=add_generation_prompt, tools=tools, **kwargs)


def load_text_processor(bundle_dir: str | os.PathLike[str], spec: Any = None) -> NativeTextProcessor:
    """Load the text processor of a bundle folder.

    `spec` is pipeline.json's `preprocessing.text` object (keys `tokenizer`, `config`,
    `chat_template`, all optional; None means all defaults). Defaults: tokenizer.json (required),
    tokenizer_config.json and chat_template.jinja when present; the .jinja file overrides the
    config's chat_template, as in transformers.
    """
    files = resolve_text_files(bundle_dir, spec)
    try:
        tokenizer = Tokenizer.from_file(files.tokenizer)
    except Exception as exc:
        raise TextError(f"cannot load tokenizer {files.tokenizer} ({SPEC_PATH}.tokenizer): {exc}") from exc
    config_data = read_json(files.config) if files.config else {}
    stm = read_json(files.special_tokens_map) if files.special_tokens_map else None
    config = parse_tokenizer_config(config_data, stm, where=files.config or "tokenizer_config.json")
    _add_config_tokens(tokenizer, config)

    template = tool_template = None
    if files.chat_template is not None:
        with open(files.chat_template, encoding="utf-8") as handle:
            template = ChatTemplate(handle.read(), origin=files.chat_template, special_tokens=config.special_tokens)
    elif config.chat_template is not None:
        origin = f"{files.config} (chat_template)"
        source = select_template(config.chat_template, origin=origin)
        if source is not None:
            template = ChatTemplate(source, origin=origin, special_tokens=config.special_tokens)
        tool_source = select_template(config.chat_template, tools=True, origin=origin)
        if tool_source is not None and tool_source != source:
            tool_template = ChatTemplate(tool_source, origin=f"{origin} tool_use", special_tokens=config.special_tokens)
    return NativeTextProcessor(tokenizer, config, template, tool_template)
