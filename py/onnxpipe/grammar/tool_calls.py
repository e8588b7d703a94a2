"""A reply's text -> its content and OpenAI tool_calls, in the syntax grammar/tools.py resolved.

A call is a JSON object naming one of the given tools (``name_key``) with an arguments object
(``arguments_key``), between ``begin`` and ``end``; a block that is not one (bad JSON, an unknown
name, arguments that are not an object) stays in the content, as it was written.
"""

from __future__ import annotations

import json
import secrets

from ..config.schema import ToolCallFormat
from .tools import Tool


def call_id() -> str:
    return "call_" + secrets.token_hex(12)


def _as_call(text: str, fmt: ToolCallFormat, names: set[str]) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    name, arguments = value.get(fmt.name_key), value.get(fmt.arguments_key, {})
    if not isinstance(name, str) or name not in names or not isinstance(arguments, dict):
        return None
    return {"id": call_id(), "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def parse_tool_calls(text: str, fmt: ToolCallFormat, tools: list[Tool]) -> tuple[str, list[dict]]:
    """(content, calls): the reply's text without its well-formed calls, and those calls."""
    names = {t.name for t in tools}
    begin, end = fmt.begin.strip(), fmt.end.strip()
    if not begin:   # the reply is one call's JSON alone (an end marker after it is allowed)
        body = text.strip()
        if end and body.endswith(end):
            body = body[: -len(end)].strip()
        found = _as_call(body, fmt, names)
        return ("", [found]) if found is not None else (text, [])
    content, calls, at = [], [], 0
    while True:
        start = text.find(begin, at)
        if start < 0:
            break
        stop = text.find(end, start + len(begin)) if end else -1
        inner_end = stop if stop >= 0 else len(text)
        found = _as_call(text[start + len(begin):inner_end].strip(), fmt, names)
        after = inner_end + len(end) if stop >= 0 else len(text)
        if found is None:   # malformed: kept as written
            content.append(text[at:after])
        else:
            content.append(text[at:start])
            calls.append(found)
        at = after
    content.append(text[at:])
    return ("".join(content).strip() if calls else text), calls
