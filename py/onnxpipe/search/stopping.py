"""Stopping criteria: stop ids, stop strings (with hold-back so no partial match leaks), lengths."""

from __future__ import annotations

from .options import SearchOptions


class StopStrings:
    """Finds stop strings in streamed text; holds back text that might start one."""

    def __init__(self, strings: tuple[str, ...]):
        self.strings = tuple(s for s in strings if s)
        self.hold = max((len(s) for s in self.strings), default=1) - 1
        self.text = ""
        self.sent = 0

    def push(self, delta: str) -> tuple[str, bool]:
        """(text safe to emit now, whether a stop string was hit)."""
        self.text += delta
        if not self.strings:
            out, self.sent = self.text[self.sent:], len(self.text)
            return out, False
        search_from = max(0, self.sent - self.hold)
        hits = [i for i in (self.text.find(s, search_from) for s in self.strings) if i >= 0]
        if hits:
            end = min(hits)
            out = self.text[self.sent:end]
            self.text, self.sent = self.text[:end], end
            return out, True
        safe = max(self.sent, len(self.text) - self.hold)
        out, self.sent = self.text[self.sent:safe], safe
        return out, False

    def flush(self) -> str:
        out, self.sent = self.text[self.sent:], len(self.text)
        return out


def stop_ids(options: SearchOptions, eos: tuple[int, ...]) -> frozenset[int]:
    ids = set(options.stop_token_ids)
    if not options.ignore_eos:
        ids.update(eos)
    return frozenset(ids)
