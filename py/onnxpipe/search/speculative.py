"""Speculative decoding settings and the drafters that propose tokens to verify.

A drafter guesses the next few tokens from what is already known; the loop feeds the last
token plus the guesses through the decoder in ONE pass and keeps the guesses the model itself
would have picked (loops/autoregressive.py). No second model: ``prompt_lookup`` copies what
followed the latest earlier occurrence of the last n ids (n = ``ngram`` down to 1) in the
prompt and the reply so far, which pays off when a reply quotes or repeats its context.
"""

from __future__ import annotations

from typing import Protocol

from ..config.parse import parse_spec
from ..config.ranges import check_ranges
from ..config.registry import DRAFTERS, register_check
from ..config.schema import Speculative
from ..errors import ConfigError, InputError

MAX_DRAFT = 32     # verify passes wider than this cost more than a draft could save


class Drafter(Protocol):
    def propose(self, ids: list[int], limit: int) -> list[int]:
        """Up to ``limit`` ids guessed to follow ``ids`` (may be empty)."""


class PromptLookup:
    """Copy what followed the latest earlier occurrence of the last n ids, n = ngram .. 1."""

    def __init__(self, settings: Speculative):
        self.ngram = settings.ngram

    def propose(self, ids: list[int], limit: int) -> list[int]:
        size = len(ids)
        for n in range(min(self.ngram, size - 1), 0, -1):
            tail = ids[size - n:]
            first = tail[0]
            # latest start first: recent context predicts the continuation best
            for start in range(size - n - 1, -1, -1):
                if ids[start] == first and ids[start:start + n] == tail:
                    follow = ids[start + n:start + n + limit]
                    if follow:
                        return follow
        return []


DRAFTERS.register("prompt_lookup", PromptLookup)   # the names generation.speculative.method takes


class DraftWindow:
    """How many draft tokens to verify next, from how the last ones fared.

    A pass over k drafts costs more than a one-token pass, and the more so the larger k:
    onnxruntime-web's WASM runs SmolLM2's fp32 file at about 1.2x a one-token pass for 1 draft,
    1.6x for 2, 2.5x for 4 (its M > 1 products are compute-bound). So the window starts at one
    draft, grows by one after a fully accepted draft (up to ``max_draft``) and falls back to what
    was accepted after a rejection; a rejected one-token draft also pauses drafting for 1, 2, 4,
    ... steps (up to 16) until a draft is accepted again, so text the lookup can't predict costs
    little more than plain decoding.
    """

    MAX_PAUSE = 16

    def __init__(self, max_draft: int):
        self.max_draft = max_draft
        self.size = 1
        self.pause = 0        # steps left without drafting
        self.misses = 0       # consecutive one-token drafts rejected

    def limit(self) -> int:
        if self.pause:
            self.pause -= 1
            return 0
        return self.size

    def update(self, drafted: int, accepted: int) -> None:
        if accepted == drafted:
            self.size = min(self.max_draft, self.size + 1)
            self.misses = 0
            return
        if accepted == 0 and drafted == 1:
            self.pause = min(self.MAX_PAUSE, 2 ** self.misses)
            self.misses += 1
        elif accepted:
            self.misses = 0
        self.size = max(1, accepted)


def problems(s: Speculative) -> list[tuple[str, str]]:
    """(key, message) for each out-of-range setting."""
    found = []
    if not 1 <= s.max_draft <= MAX_DRAFT:
        found.append(("max_draft", f"expected max_draft in 1..{MAX_DRAFT}, found {s.max_draft}"))
    if s.ngram < 1:
        found.append(("ngram", f"expected ngram >= 1, found {s.ngram}"))
    return found


def check_config(spec, file: str, bundle_dir: str | None = None) -> None:
    """Load-time checks of generation.speculative that need no sessions."""
    s = spec.generation.speculative
    if s is None:
        return
    if spec.generation.loop != "autoregressive":
        raise ConfigError(f'"speculative" drafts tokens for generation.loop "autoregressive", found '
                          f'"{spec.generation.loop}": remove it', file=file, path="$.generation.speculative")
    for key, message in problems(s):
        raise ConfigError(message, file=file, path=f"$.generation.speculative.{key}")


register_check("speculative", check_config, order=50)


def check_state(spec, executor, file: str) -> None:
    """Load-time: pipeline.json asks for speculation, so the state must be able to go back."""
    if spec.generation.speculative is None:
        return
    why = executor.cannot_rewind()
    if why:
        raise ConfigError(f"speculative decoding drops the positions of rejected drafts, but {why}: "
                          f"remove generation.speculative", file=file, path="$.generation.speculative")


def from_call(value) -> Speculative | None:
    """The per-call ``speculative`` search option: an object like pipeline.json's, or None /
    False to decode one token per pass."""
    if value is None or value is False:
        return None
    if isinstance(value, Speculative):
        settings = value
    elif isinstance(value, dict):
        try:
            settings = parse_spec(Speculative, value, "search options", "speculative")
        except ConfigError as error:
            raise InputError(str(error)) from None
    else:
        raise InputError(f'search option "speculative": expected an object such as {{"method": '
                         f'"prompt_lookup", "max_draft": 4, "ngram": 3}} or null, found {value!r:.80}')
    for _, message in problems(settings):
        raise InputError(f'search option "speculative": {message}')
    try:   # the ranges pipeline.json declares for the same keys
        check_ranges(settings, None, "speculative")
    except ConfigError as error:
        raise InputError(f'search option "{error.path}": {error.detail}') from None
    return settings


def drafter_for(settings: Speculative) -> Drafter:
    return DRAFTERS[settings.method](settings)
