"""GenerationResult / StreamEvent -> OpenAI's chat.completion(.chunk) and text_completion shapes,
as web/src/engine/chat.ts shapes them (onnxpipe's extra ``onnxpipe`` on the last chunk)."""

from __future__ import annotations

import time
import uuid

from .chat import GenerateCall


def usage(result) -> dict:
    completion = len(result.tokens)
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": completion,
            "total_tokens": result.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": result.cached_tokens}}


def stats(result) -> dict:
    """onnxpipe's extra: the completion's token ids and how fast it was made."""
    out = {"token_ids": list(result.tokens), "prefill_ms": result.prefill_ms,
           "decode_tokens_per_s": result.decode_tokens_per_s}
    if result.speculative:
        out["speculative"] = result.speculative
    if result.grammar:
        out["grammar"] = result.grammar
    return out


def finish_of(result) -> str:
    """OpenAI's finish_reason: "tool_calls" when the reply is tool calls."""
    return "tool_calls" if result.tool_calls else result.finish_reason


class Replies:
    """The shapes of one request's reply: a chat completion or a (legacy) text completion."""

    def __init__(self, call: GenerateCall, model: str):
        self.call, self.model = call, model
        self.chat = call.messages is not None
        self.id = f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def whole(self, result) -> dict:
        if not self.chat:
            choice = {"index": 0, "text": result.text, "finish_reason": result.finish_reason, "logprobs": None}
            return {**self._head("text_completion"), "choices": [choice], "usage": usage(result), "onnxpipe": stats(result)}
        message = {"role": "assistant", "content": result.text, "refusal": None}
        if result.tool_calls:
            message = {"role": "assistant", "content": result.text or None, "refusal": None,
                       "tool_calls": [{**c, "function": dict(c["function"])} for c in result.tool_calls]}
        choice = {"index": 0, "message": message, "finish_reason": finish_of(result), "logprobs": None}
        return {**self._head("chat.completion"), "choices": [choice], "usage": usage(result), "onnxpipe": stats(result)}

    def chunk(self, delta: dict | None = None, text: str | None = None, finish: str | None = None) -> dict:
        if not self.chat:
            choice = {"index": 0, "text": text or "", "finish_reason": finish, "logprobs": None}
            return {**self._head("text_completion"), "choices": [choice]}
        choice = {"index": 0, "delta": delta or {}, "finish_reason": finish, "logprobs": None}
        return {**self._head("chat.completion.chunk"), "choices": [choice]}

    def first(self) -> list[dict]:
        return [self.chunk({"role": "assistant", "content": ""})] if self.chat else []

    def text(self, event) -> list[dict]:
        """A stream event's text; nothing when the reply is held back (tools) or empty."""
        if not event.text or self.call.holds_back:
            return []
        return [{**self.chunk({"content": event.text}, event.text), "onnxpipe": {"token_ids": list(event.token_ids)}}]

    def last(self, result) -> list[dict]:
        out = []
        if self.call.holds_back and result.text:
            out.append({**self.chunk({"content": result.text}), "onnxpipe": {"token_ids": list(result.tokens)}})
        for index, c in enumerate(result.tool_calls or []):
            out.append(self.chunk({"tool_calls": [{"index": index, "id": c["id"], "type": "function",
                                                   "function": dict(c["function"])}]}))
        out.append({**self.chunk(finish=finish_of(result) if self.chat else result.finish_reason), "onnxpipe": stats(result)})
        if self.call.include_usage:
            out.append({**self._head("chat.completion.chunk" if self.chat else "text_completion"), "choices": [],
                        "usage": usage(result)})
        return out
