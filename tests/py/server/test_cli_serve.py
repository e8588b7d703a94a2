"""`python -m onnxpipe serve` as a user starts it: a subprocess that loads the bundle (its
sessions on --threads 1), listens, answers /health and a chat request from the `openai` client,
and ends on SIGINT; bad flags and bundles are refused before it listens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import CHAT, MODELS, _free_port

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "py")}


def onnxpipe(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "onnxpipe", *args], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def test_serve_starts_answers_and_stops(openai_client):
    if not any(CHAT.glob("*.onnx")):
        pytest.skip(f"{CHAT} is not built: run `make models`")
    port = _free_port()
    proc = onnxpipe("serve", f"chat={CHAT}", "--port", str(port), "--max-queue", "2", "--max-tokens", "64",
                    "--threads", "1")
    try:
        deadline = time.monotonic() + 40
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health").json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert health["models"]["chat"]["max_queue"] == 2
        api = openai_client(f"http://127.0.0.1:{port}")
        reply = api.chat.completions.create(model="chat", messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
        assert reply.model == "chat" and reply.usage.completion_tokens <= 3
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out


@pytest.mark.parametrize("args, says", [
    (["--max-queue", "-1"], "--max-queue: expected an integer >= 0, found -1"),
    (["--max-upload-mb", "0"], "--max-upload-mb: expected a number above 0, found 0.0"),
])
def test_bad_flags_are_refused(args, says):
    proc = onnxpipe("serve", str(CHAT), *args)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and says in out, out


def test_a_bundle_without_an_endpoint_is_refused():
    vad = MODELS / "silero-vad"
    if not any(vad.glob("*.onnx")):
        pytest.skip(f"{vad} is not built: run `make models`")
    proc = onnxpipe("serve", str(vad))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "a voice-activity bundle has no OpenAI endpoint" in out, out
