"""Continuous batching through `onnxpipe serve --max-concurrent 16` (server/batch_scheduler.py)
with the official `openai` client, on SmolLM2 135M: 16 concurrent streaming clients with
different options (greedy, seeded sampling, different max_tokens, a stop string, a json_schema)
each get the tokens and text the same request gets alone (pipe.chat natively with the options
the server maps it to); a client that disconnects mid-stream frees its slot for a queued request
(metrics count its 499); a full batch and queue answer 429; a request refused while it is
prepared (context, tools) fails alone; completions are rows too; /v1/models says which bundle
is batched and why another isn't.

Exact equality: SmolLM2's genai bundle attends with GroupQueryAttention, which computes each
batch row on its own (docs/batching.md, Numerics), and each row samples with its own seeded RNG,
so the batched rows give batch 1's tokens exactly; no margin rule is needed."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from conftest import CHAT, VOICE

MODEL = CHAT.name
TOPICS = ["colours", "fruits", "planets", "rivers", "birds", "metals", "trees", "oceans"]
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}}


def _bodies() -> list[dict]:
    """16 requests: greedy and seeded sampling, max_tokens 6..20, a stop string, a json_schema."""
    out = []
    for i in range(16):
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"Name three {TOPICS[i % 8]}."}],
                "max_tokens": 6 + i % 8 * 2}
        if i % 2:
            body.update(temperature=0.8, seed=100 + i, top_p=0.95 if i % 4 == 1 else None)
        else:
            body.update(temperature=0)
        out.append({k: v for k, v in body.items() if v is not None})
    out[4]["stop"] = [","]
    out[4]["max_tokens"] = 20
    out[9] = {"model": MODEL, "max_tokens": 40, "temperature": 0,
              "messages": [{"role": "user", "content": "Give a person's name and age as JSON."}],
              "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
    return out


def _alone(bodies: list[dict]) -> list[tuple[list[int], str]]:
    """Each request run alone, natively, with the options the server maps it to."""
    import onnxpipe
    from onnxpipe.server.chat import chat_call

    pipe = onnxpipe.load(str(CHAT))
    out = []
    for body in bodies:
        call = chat_call(dict(body))
        pipe.reset()
        result = pipe.chat(call.messages, **call.options)
        out.append((list(result.tokens), result.text))
    return out


def _streamed(api, body: dict) -> tuple[list[int], str, str]:
    """(token ids, text, finish_reason) of one streamed request."""
    extra = {k: v for k, v in body.items() if k not in ("model", "messages")}
    parts, tokens, finish = [], None, None
    for chunk in api.chat.completions.create(model=body["model"], messages=body["messages"], stream=True, **extra):
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
            tokens = chunk.model_extra["onnxpipe"]["token_ids"]
    return tokens, "".join(parts), finish


@pytest.fixture(scope="module")
def batched(serve, openai_client):
    with serve([CHAT, VOICE], max_concurrent=16, max_queue=16, max_tokens=512) as (base, app):
        yield base, openai_client(base), app


def test_models_say_which_bundle_is_batched(batched):
    base, api, _ = batched
    cards = {m.id: m.model_extra for m in api.models.list().data}
    assert cards[MODEL]["batching"] is True and cards[MODEL]["batching_reason"] is None
    assert cards[MODEL]["max_concurrent"] == 16
    voice = cards[VOICE.name]
    assert voice["batching"] is False and "one sequence at a time" in voice["batching_reason"]
    assert "speech" in voice["batching_reason"]


def test_16_concurrent_streams_give_what_each_gives_alone(batched):
    base, api, _ = batched
    bodies = _bodies()
    busiest, stop = [0], threading.Event()

    def watch():   # how many rows decode at once (the batch really forms)
        while not stop.is_set():
            busiest[0] = max(busiest[0], httpx.get(f"{base}/health").json()["models"][MODEL]["running"])
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with ThreadPoolExecutor(len(bodies)) as pool:
            got = list(pool.map(lambda b: _streamed(api, b), bodies))
    finally:
        stop.set()
        watcher.join(timeout=5)
    assert busiest[0] > 1, "the requests never decoded together"
    want = _alone(bodies)
    for i, (body, (tokens, text, finish), (alone_tokens, alone_text)) in enumerate(zip(bodies, got, want)):
        assert tokens == alone_tokens, f"request {i} ({body}): batched tokens differ from alone"
        assert text == alone_text, f"request {i}: batched text differs from alone"
        assert finish in ("stop", "length")
    assert "," not in got[4][1] and got[4][2] == "stop"   # the stop string cut it
    assert set(__import__("json").loads(got[9][1])) == {"name", "age"}   # the schema held


def test_a_bad_request_fails_alone_while_the_batch_goes_on(batched):
    base, api, _ = batched
    stream = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Count to ten."}],
                                         max_tokens=30, temperature=0, stream=True)
    chunks = iter(stream)
    next(chunks)
    # a prompt the context can't hold is refused when the worker prepares it: that request alone
    with pytest.raises(openai.BadRequestError) as info:
        api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi " * 9000}], max_tokens=4)
    assert "context" in info.value.body["message"]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    with pytest.raises(openai.BadRequestError) as info:   # SmolLM2's template has no tool-call syntax
        api.chat.completions.create(model=MODEL, max_tokens=20, tools=tools, tool_choice="required",
                                    messages=[{"role": "user", "content": "Weather in Paris?"}])
    assert info.value.body["param"] == "tools"
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == ["length"]


def test_completions_are_batched_rows_too(batched):
    import onnxpipe
    from onnxpipe.server.chat import completion_call

    _, api, _ = batched
    bodies = [{"model": MODEL, "prompt": f"The three largest {topic} are", "max_tokens": 10, "temperature": t,
               "seed": 5} for topic, t in (("lakes", 0), ("cities", 0.9), ("deserts", 0.7))]
    with ThreadPoolExecutor(len(bodies)) as pool:
        got = list(pool.map(lambda b: api.completions.create(**b), bodies))
    pipe = onnxpipe.load(str(CHAT))
    for body, reply in zip(bodies, got):
        call = completion_call(dict(body))
        alone = pipe.generate(call.prompt, **call.options)
        assert reply.model_extra["onnxpipe"]["token_ids"] == alone.tokens and reply.choices[0].text == alone.text
        assert reply.usage.prompt_tokens == alone.prompt_tokens


def test_a_dropped_stream_frees_its_slot_for_a_queued_request(serve, openai_client):
    with serve([CHAT], max_concurrent=2, max_queue=1, max_tokens=512) as (base, _app):
        api = openai_client(base)
        ask = [{"role": "user", "content": "Tell me a long story."}]
        a = api.chat.completions.create(model=MODEL, messages=ask, max_tokens=500, stream=True)
        b = api.chat.completions.create(model=MODEL, messages=ask, max_tokens=500, stream=True, temperature=0)
        next(iter(a)), next(iter(b))   # both slots decode
        third: dict = {}
        waiter = threading.Thread(target=lambda: third.setdefault("reply", api.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)), daemon=True)
        waiter.start()
        deadline = time.monotonic() + 10
        while httpx.get(f"{base}/health").json()["models"][MODEL]["queued"] != 1:
            assert time.monotonic() < deadline, "the third request did not queue"
            time.sleep(0.02)
        with pytest.raises(openai.RateLimitError) as info:   # two rows decode, one waits: full
            api.chat.completions.create(model=MODEL, messages=ask, max_tokens=3)
        assert "--max-concurrent 2" in info.value.body["message"]
        a.close()   # its client goes away: its row leaves at the next step, the third takes the slot
        waiter.join(timeout=15)
        assert "reply" in third, "the queued request did not get the dropped stream's slot"
        assert third["reply"].choices[0].finish_reason in ("stop", "length")
        health = httpx.get(f"{base}/health").json()["models"][MODEL]
        assert health["running"] == 1 and health["queued"] == 0   # b still decodes
        b.close()
        deadline = time.monotonic() + 5
        while httpx.get(f"{base}/health").json()["models"][MODEL]["running"]:
            assert time.monotonic() < deadline, "the dropped stream's row did not leave"
            time.sleep(0.02)
        exposed = httpx.get(f"{base}/metrics").text
        assert f'onnxpipe_requests_total{{endpoint="/v1/chat/completions",model="{MODEL}",status="499"}} 2.0' in exposed
        assert f'onnxpipe_requests_total{{endpoint="/v1/chat/completions",model="{MODEL}",status="200"}} 1.0' in exposed
        assert f'onnxpipe_queue_depth{{model="{MODEL}"}} 0.0' in exposed
        assert f'onnxpipe_time_to_first_token_seconds_count{{model="{MODEL}"}} 3.0' in exposed
