"""A real `onnxpipe serve` (uvicorn on a free port, in a thread) over the project's bundles, and
the official `openai` client pointed at it."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "public" / "models"
CHAT = MODELS / "smollm2-135m-instruct"
VOICE = MODELS / "piper-en-us-joe"
WHISPER = MODELS / "whisper-base"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(bundles: list[Path], **limits):
    """Serve ``bundles`` with ``limits`` (server.app.Limits fields); yields (base URL, FastAPI app)."""
    import uvicorn
    from onnxpipe.server.app import Limits, build

    for bundle in bundles:
        if not any(bundle.glob("*.onnx")) and not any(bundle.glob("**/*.onnx")):
            pytest.skip(f"{bundle} is not built: run `make models`")
    asgi, app = build([str(b) for b in bundles], Limits(**limits))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.registry.close()


def client(base: str, **kw):
    import openai

    return openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, **kw)


@pytest.fixture(scope="session")
def serve():
    """``with serve([bundle, ...], max_queue=...) as (base_url, app):`` a running server."""
    return serving


@pytest.fixture(scope="session")
def openai_client():
    """``openai_client(base_url)``: the official client (no retries) for a running server."""
    return client
