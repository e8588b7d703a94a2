"""Render Hugging Face chat templates exactly as transformers does.

The environment mirrors transformers' `_compile_jinja_template`: an immutable sandbox with
trim_blocks/lstrip_blocks, the loopcontrols extension, `raise_exception`, `strftime_now`,
a `tojson` filter that keeps non-ASCII text, the restricted `dict`/`namespace` globals and a
pass-through `{% generation %}` tag. Inputs are reduced to plain JSON data first, as there.

Needs `jinja2` only when a template is compiled; the input preparation is plain Python so a
browser build can reuse it with another renderer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from onnxpipe.text.base import TextError

# Chat templates are untrusted code; older jinja2 releases have known sandbox escapes.
MIN_JINJA2 = (3, 1, 6)
# Names a message's reasoning is passed under; templates read the first (transformers aliases them).
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class ChatTemplateError(TextError):
    """A chat template failed to compile or render; the message names the template file."""


def plain_data(value: Any) -> Any:
    """Rebuild `value` from plain JSON types so the sandbox sees no foreign objects."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_data(v) for v in value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return plain_data(value.item())
    return f"<{type(value).__name__}>"


def prepare_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as transformers hands them to a template: None values dropped, plain data, reasoning aliased."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ChatTemplateError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if len(messages) == 0:
        raise ChatTemplateError("cannot apply a chat template to an empty conversation; give at least one message")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"messages[{i}] must be a dict with 'role' and 'content', got {message!r}")
        msg = plain_data({k: v for k, v in message.items() if v is not None})
        reasoning = next((msg[k] for k in REASONING_FIELDS if msg.get(k) is not None), None)
        if reasoning is not None:
            msg = {"thinking": reasoning, **msg, "reasoning_content": reasoning}
        out.append(msg)
    return out


def template_variables(
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    special_tokens: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every variable a template sees: messages, tools, documents, add_generation_prompt,
    the named special tokens (bos_token, eos_token, ...) and `extra` (which overrides them)."""
    variables: dict[str, Any] = {
        "messages": prepare_messages(messages),
        "tools": plain_data(list(tools)) if tools is not None else None,
        "documents": plain_data(list(documents)) if documents is not None else None,
        "add_generation_prompt": bool(add_generation_prompt),
    }
    kwargs = {**(special_tokens or {}), **(extra or {})}
    variables.update(plain_data(kwargs))
    return variables


def select_template(value: str | Mapping[str, str] | None, tools: Any = None, origin: str = "") -> str | None:
    """Pick one template from a config value that may hold several named ones (as transformers does)."""
    if value is None or isinstance(value, str):
        return value
    if tools is not None and "tool_use" in value:
        return value["tool_use"]
    if "default" in value:
        return value["default"]
    raise ChatTemplateError(
        f"{origin or 'chat_template'}: several chat templates and none named 'default'; "
        f"names: {', '.join(sorted(value))}"
    )


def _raise_exception(message: Any) -> None:
    import jinja2

    raise jinja2.exceptions.TemplateError(str(message))


def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False) -> str:
    """transformers' tojson: no HTML escaping, non-ASCII kept, optional indent/separators."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _make_environment() -> Any:
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:
        raise ChatTemplateError("rendering chat templates needs jinja2 (pip install 'jinja2>=3.1.6')") from exc
    version = tuple(int(p) for p in jinja2.__version__.split(".")[:3] if p.isdigit())
    if version < MIN_JINJA2:
        raise ChatTemplateError(
            f"jinja2>={'.'.join(map(str, MIN_JINJA2))} is required to render chat templates safely; "
            f"found {jinja2.__version__}"
        )

    class GenerationTag(jinja2.ext.Extension):
        # transformers' {% generation %} marks assistant text for masks; rendering is unchanged.
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller: Any) -> str:
            return caller()

    class TemplateDict:
        # `dict(...)` without attribute access to the real type
        def __call__(self, *args: Any, **kwargs: Any) -> dict:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        # namespaces reject underscore names so templates can't reach interpreter internals
        def __init__(*args: Any, **kwargs: Any) -> None:
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"chat templates cannot store underscore-prefixed attributes on a namespace: {name!r}"
                )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


def _template_line(origin: str, tb: Any) -> int | None:
    # jinja rewrites tracebacks so frames of the template carry its file name and line numbers
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == origin:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class ChatTemplate:
    """A compiled chat template plus the tokenizer's special tokens it is rendered with."""

    def __init__(self, source: str, origin: str = "<chat_template>", special_tokens: Mapping[str, str] | None = None):
        """`origin` names where the template came from (a file path) in error messages."""
        if not isinstance(source, str):
            raise ChatTemplateError(f"{origin}: a chat template must be a string, got {type(source).__name__}")
        self.source = source
        self.origin = origin
        self.special_tokens = dict(special_tokens or {})
        env = _make_environment()
        import jinja2

        try:
            code = env.compile(source, name=origin, filename=origin)
        except jinja2.TemplateSyntaxError as exc:
            raise ChatTemplateError(f"chat template {origin} line {exc.lineno}: syntax error: {exc.message}") from None
        self._template = env.template_class.from_code(env, code, env.make_globals(None), None)

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text; extra keyword arguments become template variables (e.g. enable_thinking)."""
        variables = template_variables(
            messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            documents=documents,
            special_tokens=self.special_tokens,
            extra=kwargs,
        )
        try:
            return self._template.render(**variables)
        except Exception as exc:
            line = _template_line(self.origin, sys.exc_info()[2])
            where = f"chat template {self.origin}" + (f" line {line}" if line else "")
            raise ChatTemplateError(f"{where}: {type(exc).__name__}: {exc}") from exc
