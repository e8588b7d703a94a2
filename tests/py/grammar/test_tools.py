"""Tool calling (grammar/tools.py, grammar/tool_calls.py, pipeline/tool_use.py) on a tiny random
decoder with real Qwen2.5 (Hermes-style) and Llama 3.1 (JSON) chat templates.

Random weights: a forced call either ends (finish "tool_calls", arguments valid for the
parameters) or runs out of tokens ("length"); both are checked, and every token is accepted by
a fresh XGrammar matcher of the same constraint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

import onnxpipe
from onnxpipe.config.parse import parse_spec
from onnxpipe.config.schema import TextPreprocessing
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.grammar.tool_calls import parse_tool_calls
from onnxpipe.grammar.tools import (HERMES, LLAMA_JSON, call_constraint, check_tools, detect_format,
                                    resolve_format)
from tests.fixtures.tiny_models import ensure
from tests.fixtures.tool_templates import LLAMA31, QWEN25, template_text, tool_bundle

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "unit": {"enum": ["c", "f"]}},
                   "required": ["city"]}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is 2 + 3?"}]
RUN = dict(do_sample=True, temperature=1.0, max_new_tokens=120)


@pytest.fixture(scope="module", params=[QWEN25, LLAMA31])
def bundle(request, tmp_path_factory) -> Path:
    return tool_bundle(request.param, tmp_path_factory.mktemp("tools") / "bundle")


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(str(bundle))


def _check_calls(result, names) -> None:
    assert result.finish_reason in ("tool_calls", "length"), result.finish_reason
    if result.finish_reason == "tool_calls":
        assert result.tool_calls
    for call in result.tool_calls or []:
        assert call["type"] == "function" and call["id"].startswith("call_")
        assert call["function"]["name"] in names
        jsonschema.validate(json.loads(call["function"]["arguments"]), PARAMETERS[call["function"]["name"]])


def _engine_accepts(pipe, constraint, tokens) -> None:
    session = pipe.loaded.grammar()
    compiled, _ = session.compile(constraint)
    matcher = session.matcher(compiled, set(pipe.loaded.eos))
    for token in tokens:
        assert matcher.accept(token), f"the grammar engine refuses token {token}"


# ---- the template receives the tools as transformers passes them -------------------------------

def _conversation(openai: bool) -> list[dict]:
    """A call and its answer: in OpenAI's shape (content null, arguments a JSON string) or as
    transformers' docs pass it (no content, arguments an object)."""
    args = {"a": 2, "b": 3}
    call = {"id": "call_1", "type": "function",
            "function": {"name": "add", "arguments": json.dumps(args) if openai else args}}
    assistant = {"role": "assistant", "tool_calls": [call], **({"content": None} if openai else {})}
    return [*ASK, assistant, {"role": "tool", "tool_call_id": "call_1", "content": "5"}]


def test_prompt_matches_transformers_apply_chat_template(pipe, bundle):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(bundle))
    no_content = _conversation(True)
    del no_content[1]["content"]
    for ours, theirs in ((ASK, ASK), (_conversation(True), _conversation(False)), (no_content, _conversation(False))):
        text = hf.apply_chat_template(theirs, tools=TOOLS, tokenize=False, add_generation_prompt=True)
        assert "get_weather" in text
        assert pipe.chat_prompt_ids(ours, TOOLS) == pipe.loaded.tokenizer().encode(text, add_special_tokens=False)


# ---- required / named: constrained calls --------------------------------------------------------

@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "add"}}])
def test_forced_calls_are_well_formed(pipe, choice):
    names = {"add"} if isinstance(choice, dict) else set(PARAMETERS)
    ended = 0
    for seed in range(4):
        result = pipe.chat(ASK, tools=TOOLS, tool_choice=choice, seed=seed, **RUN)
        _check_calls(result, names)
        ended += result.finish_reason == "tool_calls"
        fmt = resolve_format(None, pipe.loaded.tokenizer().chat_template_source(tools=True))
        tools = [t for t in check_tools(TOOLS) if t.name in names]
        _engine_accepts(pipe, call_constraint(tools, fmt, "tool_choice"), result.tokens)
        assert result.grammar["kind"] == "structural_tag"
        assert result.to_dict().get("tool_calls") == result.tool_calls
    assert ended, "no forced call ended within the budget in four seeds"


def test_stream_last_event_carries_the_calls(pipe):
    result = pipe.chat(ASK, tools=TOOLS, tool_choice="required", seed=3, **RUN)
    pipe.reset()
    events = list(pipe.chat_stream(ASK, tools=TOOLS, tool_choice="required", seed=3, **RUN))
    last = events[-1]
    assert last.finish_reason == result.finish_reason
    assert [c["function"] for c in last.tool_calls or []] == [c["function"] for c in result.tool_calls or []]
    assert last.content == result.text


def test_round_trip(pipe):
    for seed in range(8):
        first = pipe.chat(ASK, tools=TOOLS, tool_choice="required", seed=seed, **RUN)
        if first.finish_reason == "tool_calls":
            break
    assert first.finish_reason == "tool_calls"
    call = first.tool_calls[0]
    turn = [*ASK, {"role": "assistant", "content": first.text or None, "tool_calls": first.tool_calls[:1]},
            {"role": "tool", "tool_call_id": call["id"], "content": "5"}]
    second = pipe.chat(turn, tools=TOOLS, tool_choice="none", seed=0, do_sample=True, max_new_tokens=8)
    assert second.finish_reason in ("stop", "length") and second.tool_calls is None
    assert second.cached_tokens > 0   # the next turn continues the state of the first


def test_auto_parses_what_the_model_wrote(pipe):
    result = pipe.chat(ASK, tools=TOOLS, do_sample=False, max_new_tokens=8)
    assert result.tool_calls is None and result.finish_reason in ("stop", "length")


# ---- parsing -----------------------------------------------------------------------------------

def test_parse_hermes_calls_and_content():
    tools = check_tools(TOOLS)
    text = ('Sure.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    content, calls = parse_tool_calls(text, HERMES, tools)
    assert content == "Sure."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("add", {"a": 1, "b": 2}), ("get_weather", {"city": "Paris"})]
    assert len({c["id"] for c in calls}) == 2


@pytest.mark.parametrize("block", ['{"name": "add", "arguments": {"a": 1', '{"name": "nope", "arguments": {}}',
                                   '{"name": "add", "arguments": 3}', "[1, 2]"])
def test_parse_malformed_block_stays_content(block):
    text = f"<tool_call>\n{block}\n</tool_call>"
    assert parse_tool_calls(text, HERMES, check_tools(TOOLS)) == (text, [])


def test_parse_llama_json():
    tools = check_tools(TOOLS)
    content, calls = parse_tool_calls(' {"name": "add", "parameters": {"a": 1, "b": 2}}', LLAMA_JSON, tools)
    assert content == "" and calls[0]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    assert parse_tool_calls("The answer is 3.", LLAMA_JSON, tools) == ("The answer is 3.", [])


# ---- the syntax: detected, declared ----------------------------------------------------------------

def test_detected_from_the_template_text():
    assert detect_format(template_text(QWEN25)) == HERMES
    assert detect_format(template_text(LLAMA31)) == LLAMA_JSON
    assert detect_format("{% for m in messages %}{{ m.content }}{% endfor %}") is None


def test_declared_overrides_detection():
    spec = parse_spec(TextPreprocessing, {"tool_calls": {"begin": "<call>", "end": "</call>",
                                                         "arguments_key": "parameters", "parallel": False}},
                      "pipeline.json", "$.preprocessing.text")
    fmt = resolve_format(spec.tool_calls, template_text(QWEN25))
    assert (fmt.begin, fmt.end, fmt.arguments_key, fmt.parallel) == ("<call>", "</call>", "parameters", False)
    with pytest.raises(ConfigError, match=r"tool_calls\.arguments_key"):
        parse_spec(TextPreprocessing, {"tool_calls": {"begin": "<c>", "arguments_key": "args"}},
                   "pipeline.json", "$.preprocessing.text")


def test_undetectable_syntax_is_refused_clearly():
    pipe = onnxpipe.load(str(ensure("tjs_qwen2")))   # a ChatML template without tools
    with pytest.raises(InputError, match=r"preprocessing\.text\.tool_calls"):
        pipe.chat(ASK, tools=TOOLS, max_new_tokens=2)
    assert pipe.chat(ASK, max_new_tokens=2).finish_reason in ("stop", "length")


# ---- bad arguments name the field; the pipeline stays usable ---------------------------------------

BAD = [
    (dict(tools=[WEATHER, {"type": "function", "function": {"name": "bad name"}}]), r"tools\[1\]\.function\.name"),
    (dict(tools=[{"type": "retrieval"}]), r"tools\[0\]\.type"),
    (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]),
     r"tools\[0\]\.function\.parameters\.type"),
    (dict(tools=[WEATHER, WEATHER]), r"tools\[1\]\.function\.name.*twice"),
    (dict(tools=TOOLS, tool_choice="always"), r"tool_choice: expected one of auto, none, required"),
    (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
     r"tool_choice\.function\.name: 'nope' is not one of the tools given"),
    (dict(tool_choice="required"), r"tool_choice: 'required' needs tools"),
    (dict(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}), r"response_format"),
]


@pytest.mark.parametrize("kwargs,message", BAD)
def test_bad_tools_name_the_field(pipe, kwargs, message):
    with pytest.raises(InputError, match=message):
        pipe.chat(ASK, max_new_tokens=2, **kwargs)
    assert pipe.chat(ASK, max_new_tokens=2).finish_reason in ("stop", "length")


def test_tool_message_must_answer_a_call(pipe):
    turn = [*ASK, {"role": "tool", "tool_call_id": "call_x", "content": "5"}]
    with pytest.raises(InputError, match=r"messages\[1\]\.tool_call_id: 'call_x' answers no earlier"):
        pipe.chat(turn, tools=TOOLS, max_new_tokens=2)
    bad_args = _conversation(True)
    bad_args[1]["tool_calls"][0]["function"]["arguments"] = "{not json"
    with pytest.raises(InputError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments"):
        pipe.chat(bad_args, tools=TOOLS, max_new_tokens=2)
    assert pipe.chat(_conversation(True), tools=TOOLS, max_new_tokens=2).finish_reason in ("stop", "length")


# ---- CLI ---------------------------------------------------------------------------------------

def test_cli_flags(bundle, tmp_path, capsys):
    from onnxpipe.cli import main

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    assert main(["run", str(bundle), "--chat", "2 + 3?", "--tools", str(tools), "--tool-choice", "add",
                 "--sample", "--seed", "3", "--max-new-tokens", "120", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["finish_reason"] in ("tool_calls", "length") and out["grammar"]["kind"] == "structural_tag"
    for call in out.get("tool_calls", []):
        assert call["function"]["name"] == "add"
    schema = tmp_path / "point.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}))
    for flags, kind in ((["--response-format", str(schema)], "json_schema"), (["--response-format", "json"], "json_object"),
                        (["--regex", "[ab]{2}"], "regex")):
        assert main(["run", str(bundle), "--prompt", "hi", "--max-new-tokens", "12", "--json", *flags]) == 0
        assert json.loads(capsys.readouterr().out)["grammar"]["kind"] == kind
    grammar = tmp_path / "g.ebnf"
    grammar.write_text('root ::= "yes" | "no"')
    assert main(["run", str(bundle), "--prompt", "hi", "--max-new-tokens", "4", "--json", "--grammar", str(grammar)]) == 0
    assert json.loads(capsys.readouterr().out)["text"] in ("yes", "no")


def test_declared_syntax_on_a_bundle_whose_template_shows_none(tmp_path):
    from onnxpipe.cli import main

    folder = tmp_path / "chatml"
    shutil.copytree(ensure("tjs_qwen2"), folder)   # ChatML: no tool syntax to detect
    assert main(["convert", str(folder)]) == 0
    document = json.loads((folder / "pipeline.json").read_text())
    text = document.setdefault("preprocessing", {}).setdefault("text", {})
    text["tool_calls"] = {"begin": "<call>", "end": "</call>", "parallel": False}
    (folder / "pipeline.json").write_text(json.dumps(document))
    pipe = onnxpipe.load(str(folder))
    for seed in range(4):
        result = pipe.chat(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}},
                           seed=seed, **{**RUN, "max_length": 200})
        _check_calls(result, {"add"})
        assert pipe.loaded.tokenizer().decode(result.tokens).startswith('<call>{"name": "add", "arguments": ')
        assert len(result.tool_calls or []) <= 1


def test_named_tool_use_template_is_rendered_with_tools(tmp_path):
    from onnxpipe.text.native import load_text_processor

    folder = tmp_path / "named"
    shutil.copytree(ensure("tjs_qwen2"), folder)
    (folder / "chat_template.jinja").unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": "default", "template": "plain:{{ messages[0].content }}"},
                               {"name": "tool_use", "template": "tools:{{ tools | length }}"}]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    text = load_text_processor(folder)
    assert text.apply_chat_template(ASK) == "plain:What is 2 + 3?"
    assert text.apply_chat_template(ASK, tools=TOOLS) == "tools:2"
    assert text.chat_template_source(tools=True) == "tools:{{ tools | length }}"


# ---- strict tools with tool_choice "auto": free text, calls once opened follow their schema --------

def _replay(pipe, constraint, text: str) -> bool:
    """Whether the engine takes ``text``'s tokens (then an end id) under ``constraint``."""
    session = pipe.loaded.grammar()
    compiled, _ = session.compile(constraint)
    matcher = session.matcher(compiled, set(pipe.loaded.eos))
    tokens = pipe.text.encode(text) + [pipe.loaded.eos[0]]
    return all(matcher.accept(t) for t in tokens)


def test_strict_tool_with_auto_constrains_calls_once_opened(tmp_path):
    from onnxpipe.grammar.tools import strict_auto_constraint

    pipe = onnxpipe.load(str(tool_bundle(QWEN25, tmp_path / "q")))
    add = {"type": "function", "function": {"name": "add", "parameters": PARAMETERS["add"], "strict": True}}
    checked = check_tools([add])
    constraint = strict_auto_constraint(checked, HERMES, "tools")
    good = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    assert _replay(pipe, constraint, "Just text, no call.")
    assert _replay(pipe, constraint, good)
    assert not _replay(pipe, constraint, '<tool_call>\n{"name": "add", "arguments": {"a": "two"}}\n</tool_call>')
    assert not _replay(pipe, constraint, '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>')
    # the call itself: a strict tool compiles it, and the reply follows it or runs to length
    reply = pipe.chat([{"role": "user", "content": "2 + 3?"}], tools=[add], seed=3, **RUN)
    assert reply.grammar is not None and reply.grammar["kind"] == "structural_tag"
    if reply.tool_calls:
        _check_calls(reply, {"add"})
    with pytest.raises(InputError, match=r"tools\[0\]\.function\.strict: expected true or false"):
        pipe.chat([{"role": "user", "content": "x"}], tools=[{**add, "function": {**add["function"], "strict": "yes"}}])
    # a syntax without an opening tag can't tell text from a call while decoding: refused, named
    with pytest.raises(InputError, match=r"tools\[0\]\.function\.strict: this bundle's tool calls have no opening tag"):
        strict_auto_constraint(checked, LLAMA_JSON, "tools")
