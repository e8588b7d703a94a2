"""Chat that continues its state: only the tokens the state hasn't seen are run."""

from __future__ import annotations

from typing import Iterator

from ..errors import InputError
from ..grammar.tools import template_messages
from ..text.chat_template import ChatTemplateError
from .checks import check_unicode
from ..loops import Sequence
from .text_generation import DEFAULT_MAX_NEW_TOKENS, GenerationResult, Reply, StreamEvent
from .tool_use import tool_use


class Conversation:
    def __init__(self, generation):
        self.generation = generation
        self.loaded = generation.loaded

    def prompt_ids(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """The chat template applied to ``messages`` (with the generation prompt and ``tools``,
        as transformers' apply_chat_template passes them), as ids."""
        text = self.loaded.tokenizer()
        if not isinstance(messages, (list, tuple)):
            raise InputError(f"chat: messages: expected a list of {{role, content}} objects, found "
                             f"{type(messages).__name__}")
        if not messages:
            raise InputError("chat: messages is empty")
        for i, m in enumerate(messages):
            calls = isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls") is not None
            if not isinstance(m, dict) or "role" not in m or ("content" not in m and not calls):
                raise InputError(f"chat: messages[{i}] must be an object with role and content")
            if not isinstance(m["role"], str) or not m["role"]:
                raise InputError(f"chat: messages[{i}].role: expected a role name (a string), found {m['role']!r:.40}")
            if isinstance(m.get("content"), str):
                check_unicode(f"chat: messages[{i}].content", m["content"])
            elif calls and m.get("content") is None:   # OpenAI: an assistant's tool calls alone
                pass
            elif not isinstance(m["content"], list):   # a list: content parts, as transformers takes them
                raise InputError(f"chat: messages[{i}].content: expected a string or a list of parts, "
                                 f"found {type(m['content']).__name__}")
        messages = template_messages(messages)
        try:
            prompt = text.apply_chat_template(messages, add_generation_prompt=True, tools=tools)
        except ChatTemplateError as exc:   # it renders valid turns: these messages are what it refused
            raise InputError(f"chat: messages: {exc.message}") from None
        return text.encode(prompt, add_special_tokens=False)

    def _prepare(self, messages, max_new_tokens, search, response_format, tools, tool_choice):
        """(prompt ids, options, guide, ToolUse): everything checked and compiled before the
        state changes, so a bad argument leaves the conversation as it was."""
        self.loaded.require_loop(True, "run(inputs=...); generate() and chat() need a token loop")
        use = tool_use(self.loaded, tools, tool_choice, response_format)
        ids = self.prompt_ids(messages, use.raw if use is not None else None)
        opts = self.loaded.options(search, max_new_tokens, DEFAULT_MAX_NEW_TOKENS)
        self.generation.check_length(len(ids), opts)
        forced = use.constraint() if use is not None else None
        guide = self.generation.guide(forced if forced is not None else response_format, opts)
        return ids, opts, guide, use

    def stream(self, messages: list[dict], max_new_tokens=None, logit_mask=None, response_format=None,
               tools=None, tool_choice=None, **search) -> Iterator[StreamEvent]:
        """Continue the conversation, yielding text deltas (``logit_mask``, ``response_format``:
        see TextGeneration.stream). ``tools``: OpenAI function tools the template is given;
        ``tool_choice``: "auto" (the default), "none", "required" or {"type": "function",
        "function": {"name": ...}} (pipeline/tool_use.py); the last event carries tool_calls."""
        ids, opts, guide, use = self._prepare(messages, max_new_tokens, search, response_format, tools, tool_choice)
        return self.generation.continue_stream(self.continue_from(ids), opts, logit_mask=logit_mask, guide=guide,
                                               prompt_len=len(ids), use=use)

    def chat(self, messages: list[dict], max_new_tokens=None, on_event=None, cancel=None,
             logit_mask=None, response_format=None, tools=None, tool_choice=None, **search) -> GenerationResult:
        """Continue the conversation (see ``stream``) and return the whole reply (with tools:
        its tool_calls, finish_reason "tool_calls" and text the rest of the reply)."""
        ids, opts, guide, use = self._prepare(messages, max_new_tokens, search, response_format, tools, tool_choice)
        new_ids = self.continue_from(ids)
        return self.generation.collect(new_ids, len(ids), opts, None, on_event, cancel, logit_mask, guide, use)

    def prepare_reply(self, messages: list[dict], max_new_tokens=None, cancel=None, logit_mask=None,
                      response_format=None, tools=None, tool_choice=None, **search) -> tuple[Sequence, Reply]:
        """A reply to ``messages`` from an empty state (an independent request: no conversation
        continues, nothing is cached), built but not run: (its Sequence, its Reply), checked as
        ``chat`` checks them; the state is untouched (TextGeneration.prepare_reply)."""
        ids, opts, guide, use = self._prepare(messages, max_new_tokens, search, response_format, tools, tool_choice)
        generation = self.generation
        seq = generation.sequence_for([], ids, opts, cancel, logit_mask, guide)
        return seq, Reply(self.loaded, seq, len(ids), guide, use)

    def continue_from(self, ids: list[int]) -> list[int]:
        """Rewind the state to the longest prefix it shares with ``ids``; return the rest."""
        generation = self.generation
        history = generation.history
        keep = 0
        for a, b in zip(history, ids):
            if a != b:
                break
            keep += 1
        keep = min(keep, len(ids) - 1)   # always run at least one token
        # a plugin that lengthened the sequence (e.g. prepended audio frames) leaves positions
        # the history doesn't count: start over rather than cut at the wrong place
        aligned = self.loaded.executor.length == len(history)
        if keep == 0 or not aligned or not generation.keep(keep):
            generation.reset()
            return ids
        return ids[keep:]
