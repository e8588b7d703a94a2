"""What `onnxpipe serve` answers when things go wrong, and that it serves on: bad JSON, unknown
fields, oversized bodies (declared and chunked), unknown models and routes get OpenAI error
objects with the right status; a full queue answers 429; a client that drops its stream frees
the model at the next step; /health and /metrics report it."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from conftest import CHAT

MODEL = CHAT.name
ASK = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
LIMIT_MB = 0.05   # 52 KiB: room for a chat request, not for a huge one


@pytest.fixture(scope="module")
def server(serve, openai_client):
    with serve([CHAT], max_queue=0, max_tokens=512, max_upload_mb=LIMIT_MB) as (base, app):
        yield base, openai_client(base), app


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def serves_on(api) -> None:
    reply = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert reply.choices[0].message.content


def idle(base: str, timeout: float = 10.0) -> float:
    """Seconds until the model runs nothing (the test fails past ``timeout``)."""
    start = time.monotonic()
    while httpx.get(f"{base}/health").json()["models"][MODEL]["running"]:
        assert time.monotonic() - start < timeout, "the model is still busy"
        time.sleep(0.05)
    return time.monotonic() - start


def test_bad_requests_and_the_server_serves_on(server):
    base, api, _ = server
    url = f"{base}/v1/chat/completions"
    error = error_of(httpx.post(url, content=b'{"model": "x", "messages": [', headers={"content-type": "application/json"}), 400)
    assert error["type"] == "invalid_request_error" and "not JSON" in error["message"]
    error = error_of(httpx.post(url, json=[1, 2]), 400)
    assert "JSON object" in error["message"]
    error = error_of(httpx.post(url, json={"model": MODEL, "messages": ASK, "logprobs": True}), 400)
    assert error["param"] == "logprobs" and "not supported" in error["message"]
    error = error_of(httpx.post(url, json={"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}), 400)
    assert error["param"] == "messages[0].role"
    error = error_of(httpx.post(url, json={"model": MODEL, "messages": ASK, "temperature": "hot"}), 400)
    assert error["param"] == "temperature" and '"hot"' in error["message"]
    error = error_of(httpx.post(url, json={"model": "gpt-4o", "messages": ASK}), 404)
    assert error["param"] == "model" and MODEL in error["message"] and error["code"] == "model_not_found"
    error = error_of(httpx.get(f"{base}/v1/nothing"), 404)
    assert "/v1/nothing" in error["message"]
    with pytest.raises(openai.NotFoundError):
        api.chat.completions.create(model="gpt-4o", messages=ASK)
    serves_on(api)


def test_huge_bodies_get_413(server):
    base, api, _ = server
    huge = {"model": MODEL, "messages": [{"role": "user", "content": "x" * int(LIMIT_MB * 2 ** 20)}]}
    error = error_of(httpx.post(f"{base}/v1/chat/completions", json=huge), 413)
    assert "--max-upload-mb" in error["message"]

    def chunks():   # no Content-Length: the limit is counted as the body arrives
        yield b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "content": "'
        for _ in range(16):
            yield b"x" * 8192
        yield b'"}]}'
    error_of(httpx.post(f"{base}/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"}), 413)
    files = {"file": ("big.wav", b"\0" * int(LIMIT_MB * 2 ** 20 * 2), "audio/wav")}
    error_of(httpx.post(f"{base}/v1/audio/transcriptions", data={"model": "whisper-base"}, files=files), 413)
    serves_on(api)


def test_a_full_queue_answers_429_and_a_dropped_stream_frees_the_model(server):
    base, api, app = server
    stream = api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=500, stream=True)
    for _, chunk in zip(range(3), stream):   # it runs: the first tokens came
        assert chunk.choices
    with pytest.raises(openai.RateLimitError) as info:   # --max-queue 0: nobody may wait
        api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=3)
    assert info.value.status_code == 429 and "--max-queue 0" in info.value.body["message"]
    stream.close()   # the client goes away mid-stream
    assert idle(base) < 5, "the dropped stream's generation did not stop"
    serves_on(api)
    exposed = httpx.get(f"{base}/metrics").text
    assert f'onnxpipe_requests_total{{endpoint="/v1/chat/completions",model="{MODEL}",status="499"}} 1.0' in exposed
    assert f'status="429"' in exposed and "onnxpipe_time_to_first_token_seconds_count" in exposed
    assert f'onnxpipe_queue_depth{{model="{MODEL}"}} 0.0' in exposed


def test_health_and_models(server):
    base, _, _ = server
    health = httpx.get(f"{base}/health").json()
    assert health["status"] == "ok" and health["models"][MODEL]["max_queue"] == 0
    card = httpx.get(f"{base}/v1/models/{MODEL}").json()
    assert card["id"] == MODEL and card["endpoints"] == ["/v1/chat/completions", "/v1/completions"]
    error_of(httpx.get(f"{base}/v1/models/nope"), 404)


def test_a_client_that_leaves_the_queue_gives_its_place_up(serve, openai_client):
    with serve([CHAT], max_queue=1, max_tokens=512) as (base, _app):
        api = openai_client(base)
        stream = api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=500, stream=True)
        next(iter(stream))   # it runs
        with pytest.raises(httpx.TimeoutException):   # queued behind it, then gone
            httpx.post(f"{base}/v1/chat/completions", json={"model": MODEL, "messages": ASK}, timeout=0.5)
        deadline = time.monotonic() + 5
        while httpx.get(f"{base}/health").json()["models"][MODEL]["queued"]:
            assert time.monotonic() < deadline, "the queue kept the request whose client left"
            time.sleep(0.05)
        assert httpx.get(f"{base}/health").json()["models"][MODEL]["running"] == 1
        stream.close()
        serves_on(api)
