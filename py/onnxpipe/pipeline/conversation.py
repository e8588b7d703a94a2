"""Chat that continues its state: only the tokens the state hasn't seen are run."""

from __future__ import annotations

from typing import Iterator

from ..errors import InputError
from ..text.chat_template import ChatTemplateError
from .checks import check_unicode
from .text_generation import DEFAULT_MAX_NEW_TOKENS, GenerationResult, StreamEvent


class Conversation:
    def __init__(self, generation):
        self.generation = generation
        self.loaded = generation.loaded

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """The chat template applied to ``messages`` (with the generation prompt), as ids."""
        text = self.loaded.tokenizer()
        if not isinstance(messages, (list, tuple)):
            raise InputError(f"chat: messages: expected a list of {{role, content}} objects, found "
                             f"{type(messages).__name__}")
        if not messages:
            raise InputError("chat: messages is empty")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise InputError(f"chat: messages[{i}] must be an object with role and content")
            if not isinstance(m["role"], str) or not m["role"]:
                raise InputError(f"chat: messages[{i}].role: expected a role name (a string), found {m['role']!r:.40}")
            if isinstance(m["content"], str):
                check_unicode(f"chat: messages[{i}].content", m["content"])
            elif not isinstance(m["content"], list):   # a list: content parts, as transformers takes them
                raise InputError(f"chat: messages[{i}].content: expected a string or a list of parts, "
                                 f"found {type(m['content']).__name__}")
        try:
            prompt = text.apply_chat_template(messages, add_generation_prompt=True)
        except ChatTemplateError as exc:   # it renders valid turns: these messages are what it refused
            raise InputError(f"chat: messages: {exc.message}") from None
        return text.encode(prompt, add_special_tokens=False)

    def _prepare(self, messages, max_new_tokens, search):
        self.loaded.require_loop(True, "run(inputs=...); generate() and chat() need a token loop")
        ids = self.prompt_ids(messages)
        opts = self.loaded.options(search, max_new_tokens, DEFAULT_MAX_NEW_TOKENS)
        self.generation.check_length(len(ids), opts)
        return ids, opts

    def stream(self, messages: list[dict], max_new_tokens=None, logit_mask=None, response_format=None,
               **search) -> Iterator[StreamEvent]:
        """Continue the conversation, yielding text deltas (``logit_mask``, ``response_format``:
        see TextGeneration.stream)."""
        ids, opts = self._prepare(messages, max_new_tokens, search)
        guide = self.generation.guide(response_format, opts)
        return self.generation.continue_stream(self.continue_from(ids), opts, logit_mask=logit_mask, guide=guide)

    def chat(self, messages: list[dict], max_new_tokens=None, on_event=None, cancel=None,
             logit_mask=None, response_format=None, **search) -> GenerationResult:
        """Continue the conversation (see ``stream``) and return the whole reply."""
        ids, opts = self._prepare(messages, max_new_tokens, search)
        guide = self.generation.guide(response_format, opts)
        new_ids = self.continue_from(ids)
        return self.generation.collect(new_ids, len(ids), opts, None, on_event, cancel, logit_mask, guide)

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
