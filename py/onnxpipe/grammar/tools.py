"""Tool calling in OpenAI's shape: tools and tool_choice checked, messages readied for the chat
template, the model's call syntax (declared or detected), the constraint that forces a call.

The syntax is data: ``preprocessing.text.tool_calls`` (config/schema.py ToolCallFormat), or,
when absent, read from the chat template's text (``detect_format``), never from model_type:

- a template that writes ``<tool_call>`` (Hermes, Qwen2.5, Qwen3): ``<tool_call>\\n{"name": ...,
  "arguments": {...}}\\n</tool_call>``, several calls one after another;
- a template that asks for ``{"name": function name, "parameters": ...}`` (Llama 3.1/3.2/3.3's
  JSON tool calling, "Environment: ipython"): the reply is that JSON alone, one call.

Parsing a reply back into calls is grammar/tool_calls.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..config.schema import ToolCallFormat
from .formats import Constraint, GrammarError, structural_tag_constraint

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")   # OpenAI's rule for function names
CHOICES = ("auto", "none", "required")

HERMES = ToolCallFormat(begin="<tool_call>\n", end="\n</tool_call>", name_key="name",
                        arguments_key="arguments", parallel=True, separator="\n")
LLAMA_JSON = ToolCallFormat(begin="", end="", name_key="name", arguments_key="parameters",
                            parallel=False, separator="")


class ToolError(GrammarError):
    """Tools, tool_choice or tool messages the caller gave are malformed."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str | None
    parameters: dict         # a JSON schema object ({"type": "object"} when the tool gives none)
    strict: bool = False     # OpenAI's function.strict: calls to it follow its schema even with "auto"


def detect_format(template: str | None) -> ToolCallFormat | None:
    """The call syntax a chat template's text asks for; None when it shows none."""
    if not template:
        return None
    if "<tool_call>" in template:
        return HERMES
    if '"parameters"' in template and ("Environment: ipython" in template or "<|python_tag|>" in template):
        return LLAMA_JSON
    return None


def resolve_format(declared: ToolCallFormat | None, template: str | None) -> ToolCallFormat:
    """The declared syntax, else the detected one; a clear error when there is neither."""
    if declared is not None:
        return declared
    found = detect_format(template)
    if found is None:
        raise ToolError("tools: this bundle's tool-call syntax is neither declared "
                        "(preprocessing.text.tool_calls in pipeline.json) nor recognisable in its chat "
                        "template (no <tool_call> tag, no {\"name\", \"parameters\"} JSON form); declare "
                        "it, e.g. {\"begin\": \"<tool_call>\\n\", \"end\": \"\\n</tool_call>\"}")
    return found


def check_tools(tools: Any) -> list[Tool]:
    """OpenAI function tools, each checked; errors name tools[i].function.<key>."""
    if not isinstance(tools, (list, tuple)) or not tools:
        raise ToolError(f"tools: expected a non-empty list of {{\"type\": \"function\", \"function\": "
                        f"{{...}}}} objects, found {tools!r:.60}")
    out: list[Tool] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise ToolError(f"{where}: expected an object, found {type(tool).__name__}")
        _keys(tool, ("type", "function"), where)
        if tool.get("type") != "function":
            raise ToolError(f"{where}.type: expected \"function\", found {tool.get('type')!r:.40}")
        fn = tool.get("function")
        if not isinstance(fn, dict):
            raise ToolError(f"{where}.function: expected an object with name and parameters, "
                            f"found {type(fn).__name__}")
        _keys(fn, ("name", "description", "parameters", "strict"), f"{where}.function")
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ToolError(f"{where}.function.name: expected 1-64 letters, digits, _ or -, found {name!r:.60}")
        if any(t.name == name for t in out):
            raise ToolError(f"{where}.function.name: {name!r} is given twice")
        description = fn.get("description")
        if description is not None and not isinstance(description, str):
            raise ToolError(f"{where}.function.description: expected a string, found {type(description).__name__}")
        parameters = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict):
            raise ToolError(f"{where}.function.parameters: expected a JSON Schema object, "
                            f"found {type(parameters).__name__}")
        if parameters.get("type", "object") != "object":
            raise ToolError(f"{where}.function.parameters.type: the arguments are an object: expected "
                            f"\"object\", found {parameters.get('type')!r:.40}")
        try:
            json.dumps(parameters)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"{where}.function.parameters: not JSON data: {exc}") from None
        strict = fn.get("strict", False)
        if strict is None:
            strict = False
        if not isinstance(strict, bool):
            raise ToolError(f"{where}.function.strict: expected true or false, found {strict!r:.40}")
        out.append(Tool(name, description, parameters, strict))
    return out


def check_choice(choice: Any, tools: list[Tool] | None) -> str | Tool:
    """"auto" | "none" | "required" | the named Tool; the default is "auto" (OpenAI's)."""
    if choice is None:
        choice = "auto"
    if isinstance(choice, str):
        if choice not in CHOICES:
            raise ToolError(f"tool_choice: expected one of {', '.join(CHOICES)} or "
                            f"{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, found {choice!r:.40}")
        if choice == "required" and tools is None:
            raise ToolError(f"tool_choice: {choice!r} needs tools; none were given")
        return choice
    if not isinstance(choice, dict):
        raise ToolError(f"tool_choice: expected a string or an object, found {type(choice).__name__}")
    _keys(choice, ("type", "function"), "tool_choice")
    if choice.get("type") != "function":
        raise ToolError(f"tool_choice.type: expected \"function\", found {choice.get('type')!r:.40}")
    fn = choice.get("function")
    if not isinstance(fn, dict) or "name" not in fn:
        raise ToolError("tool_choice.function: expected {\"name\": ...}")
    _keys(fn, ("name",), "tool_choice.function")
    if tools is None:
        raise ToolError("tool_choice.function.name: names a tool but no tools were given")
    for tool in tools:
        if tool.name == fn["name"]:
            return tool
    raise ToolError(f"tool_choice.function.name: {fn['name']!r:.60} is not one of the tools given "
                    f"({', '.join(t.name for t in tools)})")


def template_messages(messages: list[dict]) -> list[dict]:
    """The messages as the chat template takes them: assistant tool_calls checked and their
    arguments as objects (Qwen2.5's and Llama 3.1's templates write ``arguments | tojson``, as
    transformers' docs pass them), tool messages checked against the calls before them."""
    out, ids = [], set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "assistant" and m.get("tool_calls") is not None:
            calls = m["tool_calls"]
            if not isinstance(calls, list) or not calls:
                raise ToolError(f"messages[{i}].tool_calls: expected a non-empty list of calls")
            m = {**m, "tool_calls": [_call(c, f"messages[{i}].tool_calls[{j}]", ids) for j, c in enumerate(calls)]}
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ToolError(f"messages[{i}].tool_call_id: a tool message answers a call: expected "
                                f"the id of an earlier assistant tool_calls entry, found {call_id!r:.60}")
            if call_id not in ids:
                raise ToolError(f"messages[{i}].tool_call_id: {call_id!r:.60} answers no earlier "
                                f"assistant tool call (ids: {', '.join(sorted(ids)) or 'none'})")
        out.append(m)
    return out


def _call(call: Any, where: str, ids: set) -> dict:
    if not isinstance(call, dict):
        raise ToolError(f"{where}: expected an object, found {type(call).__name__}")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise ToolError(f"{where}.id: expected a string, found {call_id!r:.40}")
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ToolError(f"{where}.function: expected {{\"name\", \"arguments\"}}, found {fn!r:.60}")
    arguments = fn.get("arguments", {})
    if isinstance(arguments, str):   # OpenAI's shape: a JSON string
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ToolError(f"{where}.function.arguments: not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise ToolError(f"{where}.function.arguments: expected a JSON object, found {type(arguments).__name__}")
    ids.add(call_id)
    return {**call, "type": call.get("type", "function"), "function": {**fn, "arguments": arguments}}


def call_schema(tool: Tool, fmt: ToolCallFormat) -> dict:
    """The JSON schema of one call to ``tool``: its name, then arguments matching its parameters."""
    return {"type": "object",
            "properties": {fmt.name_key: {"const": tool.name}, fmt.arguments_key: tool.parameters},
            "required": [fmt.name_key, fmt.arguments_key]}


def _tags(tools: list[Tool], fmt: ToolCallFormat) -> list[dict]:
    return [{"type": "tag",
             "begin": f'{fmt.begin}{{"{fmt.name_key}": {json.dumps(t.name)}, "{fmt.arguments_key}": ',
             "content": {"type": "json_schema", "json_schema": t.parameters},
             "end": "}" + fmt.end} for t in tools]


def strict_auto_constraint(tools: list[Tool], fmt: ToolCallFormat, field: str) -> Constraint:
    """tool_choice "auto" with a strict tool: free text, but once the reply opens a call
    (``fmt.begin``'s tag, XGrammar's triggered tags) the call follows its tool's schema."""
    trigger = fmt.begin.strip()
    if not trigger:
        i = next(i for i, t in enumerate(tools) if t.strict)
        raise ToolError(f"tools[{i}].function.strict: this bundle's tool calls have no opening tag "
                        f"(preprocessing.text.tool_calls.begin is empty), so free text and a call can't be "
                        f"told apart while decoding; use tool_choice \"required\" or a named function, or "
                        f"strict false")
    body = {"type": "triggered_tags", "triggers": [trigger], "tags": _tags(tools, fmt),
            "at_least_one": False, "stop_after_first": not fmt.parallel}
    return structural_tag_constraint({"type": "structural_tag", "format": body}, field)


def call_constraint(tools: list[Tool], fmt: ToolCallFormat, field: str) -> Constraint:
    """A structural tag (XGrammar's JSON form) that admits only well-formed calls to ``tools``:
    one, or with ``fmt.parallel`` one or more separated by ``fmt.separator``. Each call is a tag
    whose begin holds the name, written as the templates write a call back
    (``{"name": "f", "arguments": `` ... ``}``), so each tool's begin differs and the engine
    dispatches on it; its content is the parameters' schema."""
    tags = _tags(tools, fmt)
    if fmt.parallel:
        body = {"type": "tags_with_separator", "tags": tags, "separator": fmt.separator,
                "at_least_one": True, "stop_after_first": False}
    else:
        body = tags[0] if len(tags) == 1 else {"type": "or", "elements": tags}
    return structural_tag_constraint({"type": "structural_tag", "format": body}, field)


def _keys(value: dict, allowed: tuple[str, ...], field: str) -> None:
    extra = sorted(set(value) - set(allowed))
    if extra:
        raise ToolError(f"{field}: unknown key {extra[0]!r}; expected {', '.join(allowed)}")
