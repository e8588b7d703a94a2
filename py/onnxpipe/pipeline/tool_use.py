"""A chat call's tools: checked before the state changes, given to the chat template, turned
into a constraint for ``required`` / a named function, and the reply parsed back into calls.

With ``tool_choice`` "auto" the model writes freely and a well-formed call in its reply becomes
a tool call; "required" and a named function constrain the reply to calls (grammar/tools.py);
"none" still shows the template the tools (the prompt stays the conversation's, so its cached
state is reused, as OpenAI keeps them in context) but nothing is parsed as a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from ..config.schema import ToolCallFormat
from ..grammar.formats import Constraint, GrammarError, constraint_from
from ..grammar.tool_calls import parse_tool_calls
from ..grammar.tools import (Tool, call_constraint, check_choice, check_tools, resolve_format,
                             strict_auto_constraint)
from .text_generation import GenerationResult


@dataclass
class ToolUse:
    raw: list[dict]                    # the tools as given (what the template receives)
    tools: list[Tool]
    choice: str | Tool                 # "auto" | "none" | "required" | the named tool
    format: ToolCallFormat | None      # None with "none": nothing is parsed

    def constraint(self) -> Constraint | None:
        """The grammar a required / named call follows (with "auto", calls once opened when a
        tool is strict); None when the model writes freely."""
        if self.format is None:
            return None
        if self.choice == "auto":
            if any(t.strict for t in self.tools):
                return strict_auto_constraint(self.tools, self.format, "tools")
            return None
        tools = self.tools if self.choice == "required" else [self.choice]
        return call_constraint(tools, self.format, "tool_choice")

    def parse(self, text: str, finish: str | None) -> tuple[str, list[dict] | None, str | None]:
        """(content, tool_calls or None, finish_reason): "tool_calls" when the reply is calls."""
        if self.format is None:
            return text, None, finish
        content, calls = parse_tool_calls(text, self.format, self.tools)
        if not calls:
            return text, None, finish
        return content, calls, "tool_calls" if finish == "stop" else finish

    def finish(self, result: GenerationResult) -> GenerationResult:
        result.text, result.tool_calls, result.finish_reason = self.parse(result.text, result.finish_reason)
        return result


def tool_use(loaded, tools, tool_choice, response_format) -> ToolUse | None:
    """The call's ToolUse (None without tools), every argument checked; errors name the field."""
    if tools is None:
        check_choice(tool_choice, None)
        return None
    checked = check_tools(tools)
    choice = check_choice(tool_choice, checked)
    if choice != "auto" and choice != "none" and constraint_from(response_format) is not None:
        raise GrammarError("response_format: tool_choice required or a named function already constrains "
                           "the reply to tool calls; give one or the other")
    if choice == "auto" and any(t.strict for t in checked) and constraint_from(response_format) is not None:
        raise GrammarError("response_format: a strict tool already constrains the reply (free text, or calls "
                           "that follow their schemas); give strict tools or response_format, not both")
    fmt = None
    if choice != "none":
        text = loaded.spec.preprocessing.text
        declared = text.tool_calls if text is not None else None
        template = loaded.tokenizer().chat_template_source(tools=True)
        fmt = resolve_format(declared, template)
    return ToolUse(list(tools), checked, choice, fmt)
