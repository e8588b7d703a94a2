"""What a client hears when the Serve replica running its request dies: a retryable 503.

Ray Serve's HTTP proxy turns a replica's death mid-request into a 500 with no body (and a
stream cut short into a closed connection). This middleware runs in the proxy
(``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` names ``proxy_middlewares``; serve_ray.py sets it)
and says it the way onnxpipe's server says errors: OpenAI's error object, status 503, code
``replica_lost``, ``Retry-After: 1``; the official clients retry a 503. A stream (SSE) whose
replica died ends with that error object as its last event, as the server's own streams end on
an error. Everything the app itself answers passes through untouched.
"""

from __future__ import annotations

import json

RETRY_AFTER_S = 1
MESSAGE = ("the replica serving this request stopped before it answered (its process or node died); "
           "Ray Serve is replacing it: retry the request")


def error_body() -> bytes:
    return json.dumps({"error": {"message": MESSAGE, "type": "server_error", "param": None,
                                 "code": "replica_lost"}}).encode()


class ReplicaLost:
    """ASGI middleware around the Serve proxy's app (HTTP only)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state = {"started": False, "ended": False, "sse": False}

        async def watched(message):
            if message["type"] == "http.response.start":
                state["started"] = True
                headers = dict(message.get("headers") or [])
                state["sse"] = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["ended"] = True
            await send(message)

        failed = None
        try:
            await self.app(scope, receive, watched)
        except Exception as exc:   # noqa: BLE001 - answered below when nothing was
            failed = exc
        if not state["started"]:
            body = error_body()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    (b"retry-after", str(RETRY_AFTER_S).encode())]})
            await send({"type": "http.response.body", "body": body})
        elif not state["ended"] and state["sse"]:
            await send({"type": "http.response.body", "body": b"data: " + error_body() + b"\r\n\r\n"})
        elif failed is not None:
            raise failed   # a body cut short: the connection breaks, so the client knows it is incomplete


def proxy_middlewares():
    """The proxy callback Ray Serve calls (RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH)."""
    from starlette.middleware import Middleware

    return [Middleware(ReplicaLost)]


CALLBACK = f"{__name__}.proxy_middlewares"
