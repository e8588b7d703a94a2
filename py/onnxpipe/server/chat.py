"""OpenAI Chat Completions (and legacy Completions) requests -> the runtime's call, checked field
for field as web/src/engine/chat-params.ts checks them: every field is translated (and so works)
or refused naming it; nothing is parsed and ignored."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import chat_structured as structured
from .chat_structured import is_object, shown
from .errors import bad_request

# onnxpipe's extras beside OpenAI's fields: top_k, min_p, repetition_penalty, speculative
_SAMPLING = ["max_tokens", "temperature", "top_p", "seed", "stop", "n", "top_k", "min_p",
             "repetition_penalty", "speculative"]
CHAT_FIELDS = ["model", "messages", "stream", "stream_options", "max_completion_tokens", *_SAMPLING,
               "response_format", "tools", "tool_choice"]
COMPLETION_FIELDS = ["model", "prompt", "stream", "stream_options", *_SAMPLING]
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
EXTRA_KEYS = {"system": [], "user": [], "assistant": ["tool_calls"], "tool": ["tool_call_id"]}
MAX_SAFE_INTEGER = 2 ** 53 - 1
MIN_VALUE = 5e-324   # JavaScript's Number.MIN_VALUE: the smallest number above 0


@dataclass
class GenerateCall:
    """A checked request: what to run (``messages`` for chat, ``prompt`` for completions) and how."""

    model: str
    options: dict = field(default_factory=dict)   # keyword arguments of pipe.chat / pipe.generate
    stream: bool = False
    include_usage: bool = False
    messages: list[dict] | None = None
    prompt: str | None = None
    max_tokens_field: str = "max_tokens"   # the field that set max_new_tokens (named when it is too many)

    @property
    def holds_back(self) -> bool:
        """With tools the reply may turn out to be calls, which are not content: sent whole at the end."""
        return self.options.get("tools") is not None and self.options.get("tool_choice") != "none"


def number(params: dict, name: str, low: float, high: float, integer: bool = False):
    value = params.get(name)
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (not integer or float(value).is_integer()) and low <= value <= high
    if not ok:
        kind = "an integer" if integer else "a number"
        raise bad_request(f"{name}: expected {kind} from {_num(low)} to {_num(high)}, found {shown(value)}", name)
    return int(value) if integer else value


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def content(value, at: str) -> str:
    """A string, or text parts joined (the only part type a text model takes)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise bad_request(f"{at}: expected a string or an array of text parts, found {shown(value)}", at)
    parts = []
    for j, part in enumerate(value):
        if not is_object(part) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise bad_request(f'{at}[{j}]: expected {{type: "text", text}}, found {shown(part)}', f"{at}[{j}]")
        parts.append(part["text"])
    return "".join(parts)


def messages(value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise bad_request(f"messages: expected a non-empty array of {{role, content}}, found {shown(value)}", "messages")
    out = []
    for i, m in enumerate(value):
        at = f"messages[{i}]"
        if not is_object(m):
            raise bad_request(f"{at}: expected an object {{role, content}}", at)
        role = ROLES.get(m.get("role")) if isinstance(m.get("role"), str) else None
        if role is None:
            raise bad_request(f"{at}.role: expected one of {', '.join(ROLES)}, found {shown(m.get('role'))}", f"{at}.role")
        allowed = ["role", "content", *EXTRA_KEYS[role]]
        for key in m:
            if key not in allowed:
                raise bad_request(f"{at}.{key}: not supported by onnxpipe on a {m['role']} message "
                                  f"(it takes {', '.join(allowed)})", f"{at}.{key}")
        if role == "assistant" and m.get("tool_calls") is not None:
            # OpenAI's shape: the content of a turn that only calls tools may be null or absent
            calls = structured.tool_calls(m["tool_calls"], f"{at}.tool_calls")
            text = "" if m.get("content") is None else content(m["content"], f"{at}.content")
            out.append({"role": role, "content": text, "tool_calls": calls})
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad_request(f"{at}.tool_call_id: expected the id of the call this answers, found {shown(call_id)}",
                                  f"{at}.tool_call_id")
            out.append({"role": role, "content": content(m.get("content"), f"{at}.content"), "tool_call_id": call_id})
        else:
            out.append({"role": role, "content": content(m.get("content"), f"{at}.content")})
    structured.check_tool_turns(out)
    return out


def stop(value) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > 4 or not all(isinstance(s, str) and s for s in items):
        raise bad_request(f"stop: expected a string or up to 4 non-empty strings, found {shown(value)}", "stop")
    return items


def _fields(params, allowed: list[str], what: str, shape: str) -> None:
    if not is_object(params):
        raise bad_request(f"expected a request object {shape}")
    for name in params:
        if name not in allowed:
            raise bad_request(f"{name}: not supported by onnxpipe's {what} (supported: {', '.join(allowed)})", name)


def _common(params: dict, call: GenerateCall) -> None:
    """stream, stream_options, n and the sampling fields both endpoints take."""
    if params.get("stream") is not None and not isinstance(params["stream"], bool):
        raise bad_request(f"stream: expected true or false, found {shown(params['stream'])}", "stream")
    call.stream = params.get("stream") is True
    so = params.get("stream_options")
    if so is not None:
        if not is_object(so) or any(k != "include_usage" for k in so) or \
                ("include_usage" in so and not isinstance(so["include_usage"], bool)):
            raise bad_request(f"stream_options: expected {{include_usage: boolean}}, found {shown(so)}", "stream_options")
        if not call.stream:
            raise bad_request("stream_options: only with stream: true", "stream_options")
        call.include_usage = so.get("include_usage") is True
    number(params, "n", 1, 1, True)   # one choice per request
    options = call.options
    max_tokens = number(params, "max_completion_tokens", 1, 1 << 20, True)
    if max_tokens is None:
        max_tokens = number(params, "max_tokens", 1, 1 << 20, True)
    else:
        call.max_tokens_field = "max_completion_tokens"
    if max_tokens is not None:
        options["max_new_tokens"] = max_tokens
    temperature = number(params, "temperature", 0, 2)
    top_p = number(params, "top_p", 0, 1)
    if top_p == 0:
        raise bad_request("top_p: expected a number above 0, up to 1", "top_p")
    if temperature == 0:
        options["do_sample"] = False
    elif temperature is not None or top_p is not None:
        options["do_sample"] = True
        if temperature is not None:
            options["temperature"] = temperature
    if top_p is not None:
        options["top_p"] = top_p
    seed = number(params, "seed", 0, MAX_SAFE_INTEGER, True)
    if seed is not None:
        options["random_seed"] = seed
    stops = stop(params.get("stop"))
    if stops:
        options["stop_strings"] = stops
    for name, low, high, integer in (("top_k", 0, 1 << 20, True), ("min_p", 0, 1, False),
                                     ("repetition_penalty", MIN_VALUE, 100, False)):
        value = number(params, name, low, high, integer)
        if value is not None:
            options[name] = value
    if "speculative" in params:
        options["speculative"] = params["speculative"]   # checked by the runtime


def chat_call(params) -> GenerateCall:
    """Check a Chat Completions request and translate it; the first field at fault is named."""
    _fields(params, CHAT_FIELDS, "chat completions", "{model, messages, ...}")
    call = GenerateCall(_model(params))
    _common(params, call)
    fmt = structured.response_format(params.get("response_format"))
    if fmt:
        call.options["response_format"] = fmt
    declared = structured.tools(params.get("tools"))
    if declared:
        call.options["tools"] = declared
    choice = structured.tool_choice(params.get("tool_choice"), declared)
    if choice:
        call.options["tool_choice"] = choice
    call.messages = messages(params.get("messages"))
    return call


def completion_call(params) -> GenerateCall:
    """Check a (legacy) Completions request: one prompt string, the same sampling fields."""
    _fields(params, COMPLETION_FIELDS, "completions", "{model, prompt, ...}")
    call = GenerateCall(_model(params))
    _common(params, call)
    prompt = params.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]   # the openai client's list form of one prompt
    if not isinstance(prompt, str) or not prompt:
        raise bad_request(f"prompt: expected a non-empty string (one prompt per request), found {shown(prompt)}", "prompt")
    call.prompt = prompt
    return call


def _model(params: dict) -> str:
    model = params.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request(f"model: expected the id of a served model (GET /v1/models), found {shown(model)}", "model")
    return model
