"""Ids masked out of the next choice, per sequence: end ids under the minimum length, and
tokens that would repeat an n-gram (transformers' MinLength / MinNewTokensLength /
NoRepeatNGram logits processors). The sampler graphs set their logits to -inf.
"""

from __future__ import annotations

from .options import SearchOptions


def ends_masked(options: SearchOptions, length: int, new: int) -> bool:
    """Whether the end ids are masked for the token after ``length`` ids (prompt included),
    ``new`` of them generated in this call."""
    return length < options.min_length or new < options.min_new_tokens


def repeated_ngram_ids(ids: list[int], n: int) -> list[int]:
    """Tokens that would complete an n-gram already in ``ids``: every earlier window whose first
    n - 1 ids equal the last n - 1 ids bans its own last id (n = 1 bans every id seen)."""
    size = len(ids)
    if n <= 0 or size < n:
        return []
    tail = ids[size - n + 1:] if n > 1 else []
    banned = {ids[i + n - 1] for i in range(size - n + 1) if ids[i:i + n - 1] == tail}
    return sorted(banned)
