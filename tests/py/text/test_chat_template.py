"""Chat templates render exactly as transformers renders them, and fail with the file named."""

from __future__ import annotations

import datetime as dt

import pytest

from onnxpipe.text.chat_template import ChatTemplate, ChatTemplateError, select_template, template_variables, tojson

SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}
MESSAGES = [
    {"role": "system", "content": "Be brief.", "tool_calls": None},
    {"role": "user", "content": "Héllo \"quoted\" <b>日本</b>"},
    {"role": "assistant", "content": "ok", "reasoning": "think"},
    {"role": "user", "content": "again"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
# Exercises what real templates use: namespace, loop controls, tojson(indent), filters,
# raise_exception in an untaken branch, {% generation %}, the None-dropping of keys and
# transformers' reasoning aliasing (reasoning -> reasoning_content).
RICH = """{{ bos_token }}
{%- set ns = namespace(n=0, sys='') -%}
{%- if messages[0]['role'] == 'system' %}{% set ns.sys = messages[0]['content'] %}{% endif -%}
{%- if tools %}
<tools>{{ tools | tojson(indent=2) }}</tools>
{%- endif %}
{% for m in messages %}
  {% if m['role'] == 'system' %}{% continue %}{% endif %}
  {% if m['role'] not in ['user', 'assistant'] %}{{ raise_exception('bad role ' + m['role']) }}{% endif %}
  {% set ns.n = ns.n + 1 %}
<{{ m.role }} n={{ ns.n }}>{% if m.reasoning_content is defined %}[{{ m.reasoning_content }}]{% endif %}
  {%- if m.role == 'assistant' %}{% generation %}{{ m.content | trim }}{% endgeneration %}
  {%- else %}{{ m.content | tojson }}{% endif %}{{ eos_token }}
  {% if 'tool_calls' in m %}HAS_TOOL_CALLS{% endif %}
  {% if loop.index > 10 %}{% break %}{% endif %}
{% endfor %}
{%- if add_generation_prompt %}<assistant sys="{{ ns.sys }}">{% endif %}"""


def hf_render(template: str, messages, add_generation_prompt: bool, tools=None, **kwargs) -> str:
    ctu = pytest.importorskip("transformers.utils.chat_template_utils")
    msgs = [{k: v for k, v in m.items() if v is not None} for m in messages]  # as apply_chat_template does
    rendered, _ = ctu.render_jinja_template(
        conversations=[msgs], tools=tools, chat_template=template, add_generation_prompt=add_generation_prompt,
        **{**SPECIAL, **kwargs},
    )
    return rendered[0]


@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("tools", [None, TOOLS])
def test_rich_template_matches_transformers(gen: bool, tools) -> None:
    mine = ChatTemplate(RICH, origin="rich.jinja", special_tokens=SPECIAL).render(
        MESSAGES, add_generation_prompt=gen, tools=tools
    )
    assert mine == hf_render(RICH, MESSAGES, gen, tools=tools)


def test_rich_template_exact_text() -> None:
    out = ChatTemplate(RICH, special_tokens=SPECIAL).render(MESSAGES, add_generation_prompt=True)
    assert out == (
        '<s><user n=1>"Héllo \\"quoted\\" <b>日本</b>"</s>\n'
        "<assistant n=2>[think]ok</s>\n"
        '<user n=3>"again"</s>\n'
        '<assistant sys="Be brief.">'
    )


def test_chatml_exact_and_extra_variables() -> None:
    tpl = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% if not enable_thinking %}<think></think>{% endif %}"
        "{% endif %}"
    )
    t = ChatTemplate(tpl)
    msgs = [{"role": "user", "content": "hi"}]
    assert t.render(msgs) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think></think>"
    assert t.render(msgs, enable_thinking=True) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert t.render(msgs, add_generation_prompt=False) == "<|im_start|>user\nhi<|im_end|>\n"


def test_strftime_now_and_tojson() -> None:
    assert ChatTemplate("{{ strftime_now('%Y') }}").render([{"role": "user", "content": ""}]) == str(
        dt.datetime.now().year
    )
    assert tojson({"a": "é<"}) == '{"a": "é<"}'
    assert tojson([1, 2], indent=1) == "[\n 1,\n 2\n]"
    out = ChatTemplate("{{ messages | tojson(indent=2, sort_keys=True) }}").render([{"role": "u", "content": "ü"}])
    assert out == '[\n  {\n    "content": "ü",\n    "role": "u"\n  }\n]'


def test_raise_exception_names_file_and_line() -> None:
    t = ChatTemplate(
        "line1\n{% if messages[0].role != 'user' %}\n{{ raise_exception('Conversations must start with user') }}\n"
        "{% endif %}",
        origin="/b/chat_template.jinja",
    )
    with pytest.raises(ChatTemplateError) as info:
        t.render([{"role": "assistant", "content": "x"}])
    msg = str(info.value)
    assert msg.startswith("chat template /b/chat_template.jinja line 3: ")
    assert msg.endswith("Conversations must start with user")
    assert info.value.kind == "text"


def test_syntax_error_names_file_and_line() -> None:
    with pytest.raises(ChatTemplateError, match=r"^chat template /b/t\.jinja line 2: syntax error: .*endfor"):
        ChatTemplate("ok\n{% for m in messages %}{{ m }}", origin="/b/t.jinja")


def test_runtime_type_error_is_wrapped() -> None:
    t = ChatTemplate("{{ 'x' + messages[0]['content'] }}", origin="t.jinja")
    with pytest.raises(ChatTemplateError, match=r"^chat template t\.jinja line 1: TypeError"):
        t.render([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])


def test_sandbox_blocks_escapes() -> None:
    with pytest.raises(ChatTemplateError, match="SecurityError"):
        ChatTemplate("{{ messages.__class__.__mro__ }}{% set ns = namespace(_x=1) %}").render(
            [{"role": "user", "content": ""}]
        )
    with pytest.raises(ChatTemplateError, match="SecurityError"):
        ChatTemplate("{% set ns = namespace(_x=1) %}").render([{"role": "user", "content": ""}])
    with pytest.raises(ChatTemplateError):  # immutable sandbox: no mutation of inputs
        ChatTemplate("{{ messages.append(1) }}").render([{"role": "user", "content": ""}])


def test_variables_and_selection() -> None:
    v = template_variables([{"role": "user", "content": "a", "name": None}], special_tokens=SPECIAL, extra={"x": 1})
    assert v == {
        "messages": [{"role": "user", "content": "a"}],
        "tools": None,
        "documents": None,
        "add_generation_prompt": True,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "x": 1,
    }
    with pytest.raises(ChatTemplateError, match="empty conversation"):
        template_variables([])
    assert select_template({"default": "D", "tool_use": "T"}) == "D"
    assert select_template({"default": "D", "tool_use": "T"}, tools=[]) == "T"
    with pytest.raises(ChatTemplateError, match="rag, x"):
        select_template({"x": "1", "rag": "2"}, origin="cfg.json")
