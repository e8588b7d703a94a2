"""The server's request checks (onnxpipe.server.chat), which mirror web/src/engine/chat-params.ts
and chat-structured.ts: each field translated to the runtime's options, or refused naming it in
the same words the browser engine uses."""

from __future__ import annotations

import pytest

from onnxpipe.server.chat import chat_call, completion_call
from onnxpipe.server.errors import APIError

BASE = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def refused(params: dict) -> APIError:
    with pytest.raises(APIError) as info:
        chat_call(params)
    assert info.value.status == 400
    return info.value


def test_translation():
    call = chat_call({**BASE, "max_completion_tokens": 9, "max_tokens": 3, "temperature": 0.5, "top_p": 0.9,
                      "seed": 7, "stop": "END", "top_k": 4, "min_p": 0.1, "repetition_penalty": 1.2, "n": 1,
                      "stream": True, "stream_options": {"include_usage": True},
                      "response_format": {"type": "json_object"}})
    assert call.options == {"max_new_tokens": 9, "do_sample": True, "temperature": 0.5, "top_p": 0.9,
                            "random_seed": 7, "stop_strings": ["END"], "top_k": 4, "min_p": 0.1,
                            "repetition_penalty": 1.2, "response_format": {"type": "json_object"}}
    assert call.stream and call.include_usage and call.max_tokens_field == "max_completion_tokens"
    assert chat_call({**BASE, "temperature": 0}).options == {"do_sample": False}
    assert chat_call(BASE).options == {}


def test_messages():
    call = chat_call({**BASE, "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"}]})
    assert call.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "42", "tool_call_id": "c1"}]


@pytest.mark.parametrize("extra, param, message", [
    ({"logprobs": True}, "logprobs", "logprobs: not supported by onnxpipe's chat completions (supported: model, "),
    ({"n": 2}, "n", "n: expected an integer from 1 to 1, found 2"),
    ({"temperature": True}, "temperature", "temperature: expected a number from 0 to 2, found true"),
    ({"top_p": 0}, "top_p", "top_p: expected a number above 0, up to 1"),
    ({"seed": 1.5}, "seed", "seed: expected an integer from 0 to 9007199254740991, found 1.5"),
    ({"stop": ["a", ""]}, "stop", 'stop: expected a string or up to 4 non-empty strings, found ["a",""]'),
    ({"stream_options": {"include_usage": True}}, "stream_options", "stream_options: only with stream: true"),
    ({"stream": "yes"}, "stream", 'stream: expected true or false, found "yes"'),
    ({"messages": []}, "messages", "messages: expected a non-empty array of {role, content}, found []"),
    ({"messages": [{"role": "user", "content": "x", "name": "n"}]}, "messages[0].name",
     "messages[0].name: not supported by onnxpipe on a user message (it takes role, content)"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]",
     'messages[0].content[0]: expected {type: "text", text}, found {"type":"image_url"}'),
    ({"messages": [{"role": "tool", "tool_call_id": "c9", "content": "x"}]}, "messages[0].tool_call_id",
     'messages[0].tool_call_id: no earlier assistant turn made a call with id "c9" (no tool calls before it)'),
    ({"response_format": {"type": "yaml"}}, "response_format.type",
     'response_format.type: expected one of text, json_object, json_schema, regex, grammar, found "yaml"'),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a b"}}}, "response_format.json_schema.name",
     'response_format.json_schema.name: expected 1-64 letters, digits, _ or -, found "a b"'),
    ({"response_format": {"type": "grammar", "grammar": "x", "syntax": "gbnf"}}, "response_format.syntax",
     'response_format.syntax: the grammar engine (XGrammar) reads "ebnf" only, found "gbnf"'),
    ({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]},
     "tools[1].function.name", 'tools[1].function.name: "f" is named by an earlier tool too'),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}},
     "tool_choice", 'tool_choice: no tool is named "g" (tools: f)'),
])
def test_refusals(extra, param, message):
    error = refused({**BASE, **extra})
    assert error.param == param and error.message.startswith(message), error.message


def test_completions():
    call = completion_call({"model": "m", "prompt": ["Once"], "max_tokens": 5})
    assert call.prompt == "Once" and call.messages is None and call.options == {"max_new_tokens": 5}
    with pytest.raises(APIError) as info:
        completion_call({"model": "m", "prompt": ["a", "b"]})
    assert info.value.param == "prompt"
    with pytest.raises(APIError) as info:
        completion_call({"model": "m", "prompt": "a", "echo": True})
    assert info.value.param == "echo"
