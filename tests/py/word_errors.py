"""Word error counts for transcript tests: lower-case words without punctuation, and the
word-level edit distance between what was said and what was heard."""

from __future__ import annotations

import re


def words(text: str) -> list[str]:
    """Lowercase words without punctuation ("Isn't it?" -> ["isnt", "it"])."""
    return re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("'", "").replace("\u2019", "")).split()


def edits(reference: str, hypothesis: str) -> int:
    """Word insertions, deletions and substitutions from ``reference`` to ``hypothesis``."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level edit distance over the reference's word count."""
    return edits(reference, hypothesis) / max(len(words(reference)), 1)
