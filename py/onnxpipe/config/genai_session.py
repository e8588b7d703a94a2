"""A genai section's ``session_options`` as a v2 session's ``execution_provider`` / ``session_options``
(the decoder, decoder-pipeline stages, vision / embedding and encoder sections alike)."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .parse import describe


def session_settings(options: Any, file: str, path: str) -> dict[str, Any]:
    """``options`` (the section's session_options, at ``path``) -> execution_provider (the
    providers listed, in order; none listed means the engine's default) and the other options;
    genai's log_id names its log lines only and is dropped."""
    if not isinstance(options, dict):
        raise ConfigError(f"expected an object, found {describe(options)}", file=file, path=path)
    options = dict(options)
    listed = options.pop("provider_options", [])
    if not isinstance(listed, list) or not all(isinstance(p, dict) for p in listed):
        raise ConfigError(f'expected a list of objects such as [{{"cpu": {{}}}}], found {describe(listed)}',
                          file=file, path=f"{path}.provider_options")
    options.pop("log_id", None)
    out: dict[str, Any] = {}
    providers = [next(iter(p)) for p in listed if p]
    if providers:
        out["execution_provider"] = providers
    if options:
        out["session_options"] = options
    return out
