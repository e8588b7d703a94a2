"""Chat Completions' structured output and tool fields (response_format, tools, tool_choice, and
the tool turns of messages), checked field for field as web/src/engine/chat-structured.ts checks
them, so the server and the browser engine accept and refuse the same requests."""

from __future__ import annotations

import json
import re

from .errors import bad_request

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")   # OpenAI's rule for json_schema.name and function names
FORMATS = ["text", "json_object", "json_schema", "regex", "grammar"]


def is_object(value) -> bool:
    return isinstance(value, dict)


def shown(value) -> str:
    """The value as JSON, cut at 80 characters (as the TypeScript side shows it)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))[:80]
    except (TypeError, ValueError):
        return repr(value)[:80]


def _string(value) -> bool:
    return isinstance(value, str)


def keys(value: dict, allowed: list[str], at: str) -> None:
    extra = next((k for k in value if k not in allowed), None)
    if extra is not None:
        raise bad_request(f"{at}.{extra}: unknown key; expected {', '.join(allowed)}", f"{at}.{extra}")


def text(value, at: str) -> str:
    if not _string(value) or not value:
        raise bad_request(f"{at}: expected a non-empty string, found {shown(value)}", at)
    return value


def name(value, at: str) -> str:
    if not _string(value) or not NAME.fullmatch(value):
        raise bad_request(f"{at}: expected 1-64 letters, digits, _ or -, found {shown(value)}", at)
    return value


def optional(value: dict, key: str, kind: str, at: str) -> None:
    v = value.get(key)
    if key not in value or (v is None and kind == "boolean"):
        return
    if (kind == "string" and not _string(v)) or (kind == "boolean" and not isinstance(v, bool)):
        expected = "a string" if kind == "string" else "true or false"
        raise bad_request(f"{at}.{key}: expected {expected}, found {shown(v)}", f"{at}.{key}")


def schema(value: dict, key: str, at: str) -> None:
    if key in value and not is_object(value[key]):
        raise bad_request(f"{at}.{key}: expected a JSON Schema object, found {shown(value[key])}", f"{at}.{key}")


def response_format(value, at: str = "response_format") -> dict | None:
    """response_format; None when absent. {type: "text"} is passed on (free text)."""
    if value is None:
        return None
    if not is_object(value):
        raise bad_request(f'{at}: expected an object such as {{"type": "json_object"}}, found {shown(value)}', at)
    kind = value.get("type")
    if kind in ("text", "json_object"):
        keys(value, ["type"], at)
        return {"type": kind}
    if kind == "json_schema":
        keys(value, ["type", "json_schema"], at)
        spec, field = value.get("json_schema"), f"{at}.json_schema"
        if not is_object(spec):
            raise bad_request(f"{field}: expected an object {{name, schema, strict?, description?}}, found {shown(spec)}", field)
        keys(spec, ["name", "schema", "strict", "description"], field)
        name(spec.get("name"), f"{field}.name")
        optional(spec, "description", "string", field)
        optional(spec, "strict", "boolean", field)
        schema(spec, "schema", field)
        return {"type": "json_schema", "json_schema": spec}
    if kind == "regex":
        keys(value, ["type", "regex"], at)
        return {"type": "regex", "regex": text(value.get("regex"), f"{at}.regex")}
    if kind == "grammar":
        keys(value, ["type", "grammar", "syntax"], at)
        grammar = text(value.get("grammar"), f"{at}.grammar")
        syntax = value.get("syntax")
        if "syntax" in value and syntax != "ebnf":
            raise bad_request(f'{at}.syntax: the grammar engine (XGrammar) reads "ebnf" only, found {shown(syntax)}', f"{at}.syntax")
        return {"type": "grammar", "grammar": grammar, **({"syntax": "ebnf"} if syntax else {})}
    raise bad_request(f"{at}.type: expected one of {', '.join(FORMATS)}, found {shown(kind)}", f"{at}.type")


def tools(value) -> list[dict] | None:
    """tools: a non-empty list of OpenAI function tools with distinct names; None when absent."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise bad_request('tools: expected a non-empty array of {type: "function", function: {name, ...}}, '
                          f"found {shown(value)}", "tools")
    seen: set[str] = set()
    out = []
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        if not is_object(tool):
            raise bad_request(f'{at}: expected {{type: "function", function: {{name, ...}}}}, found {shown(tool)}', at)
        keys(tool, ["type", "function"], at)
        if tool.get("type") != "function":
            raise bad_request(f'{at}.type: expected "function", found {shown(tool.get("type"))}', f"{at}.type")
        fn = tool.get("function")
        if not is_object(fn):
            raise bad_request(f"{at}.function: expected {{name, description?, parameters?, strict?}}, found {shown(fn)}",
                              f"{at}.function")
        keys(fn, ["name", "description", "parameters", "strict"], f"{at}.function")
        fn_name = name(fn.get("name"), f"{at}.function.name")
        if fn_name in seen:
            raise bad_request(f"{at}.function.name: {shown(fn_name)} is named by an earlier tool too", f"{at}.function.name")
        seen.add(fn_name)
        optional(fn, "description", "string", f"{at}.function")
        optional(fn, "strict", "boolean", f"{at}.function")
        schema(fn, "parameters", f"{at}.function")
        out.append({"type": "function", "function": fn})
    return out


def tool_choice(value, declared: list[dict] | None):
    """tool_choice: auto, none, required or a function of ``declared``; None when absent."""
    if value is None:
        return None
    if not declared:
        raise bad_request(f"tool_choice: only with tools, found {shown(value)} and no tools", "tool_choice")
    if value in ("auto", "none", "required"):
        return value
    names = [t["function"]["name"] for t in declared]
    fn = value.get("function") if is_object(value) else None
    if is_object(value) and value.get("type") == "function" and is_object(fn) and len(value) == 2 \
            and len(fn) == 1 and _string(fn.get("name")):
        if fn["name"] not in names:
            raise bad_request(f"tool_choice: no tool is named {shown(fn['name'])} (tools: {', '.join(names)})", "tool_choice")
        return {"type": "function", "function": {"name": fn["name"]}}
    raise bad_request('tool_choice: expected "auto", "none", "required" or {type: "function", function: {name}}, '
                      f"found {shown(value)}", "tool_choice")


def tool_calls(value, at: str) -> list[dict]:
    """An assistant turn's tool_calls, each {id, type: "function", function: {name, arguments: a JSON string}}."""
    if not isinstance(value, list) or not value:
        raise bad_request(f"{at}: expected a non-empty array of tool calls, found {shown(value)}", at)
    out = []
    for j, call in enumerate(value):
        where = f"{at}[{j}]"
        if not is_object(call):
            raise bad_request(f'{where}: expected {{id, type: "function", function: {{name, arguments}}}}, found {shown(call)}', where)
        keys(call, ["id", "type", "function"], where)
        call_id = text(call.get("id"), f"{where}.id")
        if call.get("type") != "function":
            raise bad_request(f'{where}.type: expected "function", found {shown(call.get("type"))}', f"{where}.type")
        fn = call.get("function")
        if not is_object(fn):
            raise bad_request(f"{where}.function: expected {{name, arguments}}, found {shown(fn)}", f"{where}.function")
        keys(fn, ["name", "arguments"], f"{where}.function")
        fn_name = text(fn.get("name"), f"{where}.function.name")
        arguments = fn.get("arguments")
        field = f"{where}.function.arguments"
        if not _string(arguments):
            raise bad_request(f"{field}: expected a JSON string, found {shown(arguments)}", field)
        try:
            json.loads(arguments)
        except ValueError:
            raise bad_request(f"{field}: expected a JSON string, found {shown(arguments)} (not JSON)", field) from None
        out.append({"id": call_id, "type": "function", "function": {"name": fn_name, "arguments": arguments}})
    return out


def check_tool_turns(messages: list[dict]) -> None:
    """Every tool turn answers a call an earlier assistant turn made (by tool_call_id)."""
    calls: list[str] = []
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            calls.extend(call["id"] for call in m.get("tool_calls") or [])
        if m["role"] == "tool" and m["tool_call_id"] not in calls:
            at = f"messages[{i}].tool_call_id"
            known = f" (calls: {', '.join(calls)})" if calls else " (no tool calls before it)"
            raise bad_request(f"{at}: no earlier assistant turn made a call with id {shown(m['tool_call_id'])}{known}", at)
