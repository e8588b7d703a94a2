"""HTTP plumbing the routes share: a cap on body size (413), JSON bodies read with errors named,
and waiting on a scheduler while watching for the client to leave."""

from __future__ import annotations

import asyncio
import json

from .errors import APIError, bad_request
from .scheduler import Submission

POLL_S = 0.25   # how often a waiting request checks that its client is still there


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is answered 413, whether its Content-Length
    says so up front or a chunked body grows past it."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _send_error(send, self._too_large(int(declared)))
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise self._too_large(seen)
            return message

        await self.app(scope, limited, send)

    def _too_large(self, size: int) -> APIError:
        return APIError(413, f"the request body is {size} bytes or more; this server takes at most {self.limit} "
                             f"(--max-upload-mb {self.limit / 2 ** 20:g})", None, "request_too_large")


async def _send_error(send, error: APIError) -> None:
    body = json.dumps(error.body()).encode()
    await send({"type": "http.response.start", "status": error.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


async def json_body(request) -> dict:
    raw = await request.body()
    try:
        params = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the request body is not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise bad_request(f"expected a JSON object as the request body, found {type(params).__name__}")
    return params


class ClientGone(Exception):
    """The client closed the connection while its request waited or ran."""


async def next_item(submission: Submission, request):
    """The submission's next item; a client that leaves meanwhile cancels it (ClientGone)."""
    step = asyncio.ensure_future(submission.__anext__())
    try:
        while True:
            done, _ = await asyncio.wait({step}, timeout=POLL_S)
            if done:
                return step.result()
            if await request.is_disconnected():
                raise ClientGone()
    except BaseException:
        submission.cancel()
        step.cancel()
        raise
