"""OpenAI error objects: ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status."""

from __future__ import annotations

import re

from ..errors import OnnxpipeError

# the runtime's input errors start with the field at fault: "tools: ...", "response_format.json_schema: ..."
_FIELD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*): ")

# status -> OpenAI's error type
_TYPES = {400: "invalid_request_error", 404: "not_found_error", 413: "invalid_request_error",
          429: "rate_limit_error", 499: "cancelled", 500: "server_error", 503: "server_error"}


class APIError(Exception):
    """A request the server refuses or could not serve; ``param`` names the request field at fault."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": _TYPES.get(self.status, "server_error"),
                          "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param, "invalid_value" if param else None)


def from_runtime(exc: BaseException) -> APIError:
    """The runtime's own errors: a bad input (an option out of range, a prompt too long) is the
    caller's 400; anything else is the server's 500, its kind kept in ``code``."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, OnnxpipeError):
        if exc.kind != "input":
            return APIError(500, exc.message, None, exc.kind)
        field = _FIELD.match(exc.message)
        return APIError(400, exc.message, field.group(1) if field else None, "invalid_value")
    return APIError(500, f"{type(exc).__name__}: {exc}", None, "internal")
