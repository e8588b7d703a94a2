"""Errors that say what went wrong, where, and what would be right.

Every error carries a ``kind`` (a short stable string) so the reason survives the trip
through the worker boundary and the CLI can map it to an exit code.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class OnnxpipeError(Exception):
    """Base class for every error onnxpipe raises on purpose."""

    kind = "error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message}


class ConfigError(OnnxpipeError):
    """A pipeline.json (or genai_config.json) that can't be used, found at load time."""

    kind = "config"

    def __init__(self, message: str, *, file: str | None = None, path: str | None = None):
        where = ""
        if file and path:
            where = f"{file}: {path}: "
        elif file:
            where = f"{file}: "
        elif path:
            where = f"{path}: "
        super().__init__(where + message)
        self.file = file
        self.path = path
        self.detail = message


class BundleError(OnnxpipeError):
    """A model bundle folder that is missing files or can't be opened."""

    kind = "bundle"


class InputError(OnnxpipeError):
    """A bad argument from the caller: empty prompt, unknown option, too-long prompt."""

    kind = "input"


class EngineError(OnnxpipeError):
    """The engine (onnxruntime / onnxruntime-web) refused to run a session."""

    kind = "engine"


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest valid choice to a misspelt ``word``, or None if nothing is close."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def choices_text(choices: Iterable[str]) -> str:
    return ", ".join(sorted(choices))
