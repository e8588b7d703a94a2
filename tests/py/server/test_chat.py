"""Chat and legacy completions through `onnxpipe serve` with the official `openai` client, on
SmolLM2 135M (public/models/smollm2-135m-instruct): whole and streamed replies agree, usage counts
the tokens, stop strings cut, a seed gives the same text again, JSON mode's reply validates
against its schema, tools reach the runtime, and n > 1 is refused naming n."""

from __future__ import annotations

import json

import openai
import pytest

from conftest import CHAT

jsonschema = pytest.importorskip("jsonschema")

MODEL = CHAT.name
ASK = [{"role": "user", "content": "Name three colours."}]
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}}


@pytest.fixture(scope="module")
def api(serve, openai_client):
    with serve([CHAT], max_tokens=256) as (base, _app):
        yield openai_client(base)


def test_models_lists_the_bundle(api):
    (model,) = api.models.list().data
    assert model.id == MODEL and model.object == "model" and model.owned_by == "onnxpipe"
    extra = model.model_extra
    assert extra["kind"] == "text" and extra["batching"] is False and "one sequence at a time" in extra["batching_reason"]


def test_whole_and_streamed_agree(api):
    whole = api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=24, temperature=0)
    choice = whole.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens == len(whole.model_extra["onnxpipe"]["token_ids"]) <= 24
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    chunks = list(api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=24, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [choice.finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens > 0   # the same prompt again: the state had it


def test_usage_only_when_asked(api):
    chunks = list(api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4, stream=True))
    assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "length"


def test_stop_cuts_the_reply(api):
    free = api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=40, temperature=0).choices[0].message.content
    word = free.split()[2]
    cut = api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=40, temperature=0, stop=[word])
    assert cut.choices[0].finish_reason == "stop"
    assert word not in cut.choices[0].message.content and free.startswith(cut.choices[0].message.content)


def test_seed_gives_the_same_text(api):
    def sample(seed):
        return api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=32, temperature=1.0, top_p=0.95,
                                           seed=seed).choices[0].message.content
    first = sample(1234)
    assert sample(99) is not None   # another request between them changes nothing
    assert sample(1234) == first


def test_json_schema_reply_validates(api):
    reply = api.chat.completions.create(
        model=MODEL, max_tokens=60, temperature=0,
        messages=[{"role": "user", "content": "Make up a person with a name and an age, as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
    assert reply.model_extra["onnxpipe"]["grammar"]["complete"] is True


def test_tools_reach_the_runtime(api):
    """SmolLM2's template shows no tool-call syntax: the runtime's refusal comes back as a 400
    naming tools (the request's own checks passed), and the server serves on."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    with pytest.raises(openai.BadRequestError) as info:
        api.chat.completions.create(model=MODEL, max_tokens=20, tools=tools, tool_choice="required",
                                    messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    assert info.value.body["param"] == "tools" and "tool-call syntax" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        api.chat.completions.create(model=MODEL, messages=ASK, tool_choice="auto")
    assert info.value.body["param"] == "tool_choice" and "only with tools" in info.value.body["message"]
    assert api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=2).choices[0].message.content


def test_completions(api):
    whole = api.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert whole.object == "text_completion" and whole.choices[0].text and whole.usage.completion_tokens <= 8
    streamed = "".join(c.choices[0].text for c in api.completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=8, temperature=0, stream=True) if c.choices)
    assert streamed == whole.choices[0].text


def test_refusals_name_the_field(api):
    with pytest.raises(openai.BadRequestError) as info:
        api.chat.completions.create(model=MODEL, messages=ASK, n=2)
    assert info.value.status_code == 400 and info.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as info:
        api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=100000)
    assert info.value.body["param"] == "max_tokens" and "--max-tokens" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        api.chat.completions.create(model=MODEL, messages=ASK, extra_body={"top_k": -1})
    assert info.value.body["param"] == "top_k"
    reply = api.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4,
                                        extra_body={"top_k": 5, "min_p": 0.1, "repetition_penalty": 1.1})
    assert reply.choices[0].message.content
