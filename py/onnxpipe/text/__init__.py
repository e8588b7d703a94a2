"""Tokenizer and chat-template adapters.

`load_text_processor` (native, needs the `tokenizers` package) is imported on first use, so
importing this package stays free of native dependencies (Pyodide imports it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onnxpipe.text.base import (
    TextError,
    TextFileError,
    TextProcessor,
    TokenizerConfig,
    parse_tokenizer_config,
    resolve_text_files,
)

if TYPE_CHECKING:
    from onnxpipe.text.native import NativeTextProcessor, load_text_processor

__all__ = [
    "NativeTextProcessor",
    "TextError",
    "TextFileError",
    "TextProcessor",
    "TokenizerConfig",
    "load_text_processor",
    "parse_tokenizer_config",
    "resolve_text_files",
]


def __getattr__(name: str) -> Any:
    if name in ("load_text_processor", "NativeTextProcessor"):
        from onnxpipe.text import native

        return getattr(native, name)
    raise AttributeError(f"module 'onnxpipe.text' has no attribute {name!r}")
