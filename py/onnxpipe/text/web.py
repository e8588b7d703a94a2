"""The browser text processor: @huggingface/tokenizers and @huggingface/jinja through the FFI.

Which files to read and how the tokenizer config and template variables are prepared is the
same pure-Python code as natively (text/base.py, text/chat_template.py); only tokenizing and
template rendering run in JavaScript (workers/bridge.ts), so ids and prompt text match.
"""

from __future__ import annotations

import json
from typing import Any

import onnxpipe_js  # type: ignore[import-not-found]  (workers/bridge.ts, Pyodide only)
from pyodide.ffi import JsException, to_js  # type: ignore[import-not-found]

from .base import SPEC_PATH, TextError, parse_tokenizer_config, read_json, resolve_text_files
from .chat_template import select_template, template_variables


class WebTextProcessor:
    def __init__(self, tokenizer, config, template: str | None, origin: str, tool_template: str | None = None):
        self._tok = tokenizer
        self._template = template
        self._tool_template = tool_template   # the named tool_use template (text/native.py)
        self._origin = origin
        self._special = dict(config.special_tokens)
        self.special_token_ids = frozenset(tokenizer.specialIds().to_py())
        self.vocab_size = int(tokenizer.vocabSize())
        eos = self._special.get("eos_token")
        eos_id = self.token_to_id(eos) if eos is not None else None
        self.eos_token_ids: tuple[int, ...] = (eos_id,) if eos_id is not None else ()
        self.byte_fallback_ids = frozenset(tokenizer.byteFallbackIds().to_py())

    @property
    def has_chat_template(self) -> bool:
        return self._template is not None

    def chat_template_source(self, tools: bool = False) -> str | None:
        """The text of the template rendered (with tools or without); None without one."""
        return (self._tool_template or self._template) if tools else self._template

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens).to_py())

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return str(self._tok.decode(to_js(list(ids)), skip_special_tokens))

    def token_to_id(self, token: str) -> int | None:
        found = int(self._tok.tokenToId(token))
        return found if found >= 0 else None

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, **kwargs: Any) -> str:
        if self._template is None:
            raise TextError("this bundle has no chat template (no chat_template.jinja and no chat_template "
                            f"in tokenizer_config.json); set {SPEC_PATH}.chat_template or pass a plain prompt")
        variables = template_variables(messages, add_generation_prompt=add_generation_prompt, tools=tools,
                                       special_tokens=self._special, extra=kwargs)
        template = self._tool_template if tools is not None and self._tool_template is not None else self._template
        try:
            return str(onnxpipe_js.renderChatTemplate(template, json.dumps(variables)))
        except JsException as exc:
            raise TextError(f"chat template {self._origin}: {exc}") from None


def load_web_text_processor(bundle_dir: str, spec: Any = None) -> WebTextProcessor:
    files = resolve_text_files(bundle_dir, spec)
    with open(files.tokenizer, encoding="utf-8") as fh:
        tokenizer_json = fh.read()
    config_data = read_json(files.config) if files.config else {}
    stm = read_json(files.special_tokens_map) if files.special_tokens_map else None
    config = parse_tokenizer_config(config_data, stm, where=files.config or "tokenizer_config.json")
    try:
        tokenizer = onnxpipe_js.makeTokenizer(tokenizer_json, json.dumps(config_data))
    except JsException as exc:
        raise TextError(f"cannot load tokenizer {files.tokenizer} ({SPEC_PATH}.tokenizer): {exc}") from None
    template, origin = None, files.chat_template or f"{files.config} (chat_template)"
    if files.chat_template is not None:
        with open(files.chat_template, encoding="utf-8") as fh:
            template = fh.read()
    elif config.chat_template is not None:
        template = select_template(config.chat_template, origin=origin)
        tool_template = select_template(config.chat_template, tools=True, origin=origin)
        return WebTextProcessor(tokenizer, config, template, origin,
                                tool_template if tool_template != template else None)
    return WebTextProcessor(tokenizer, config, template, origin)
