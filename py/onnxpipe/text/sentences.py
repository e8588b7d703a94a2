"""Split long text into sentences, so speech can be made and streamed one sentence at a time.

Rule-based and language-light: a sentence ends at . ! ? … (or their CJK forms) followed by a
space, a closing quote or bracket, or the end; blank lines end one too. Common abbreviations,
initials and decimal numbers don't end a sentence.
"""

from __future__ import annotations

import re

_ABBREVIATIONS = frozenset("""
mr mrs ms dr prof sr jr st vs etc e.g i.e cf fig no vol approx dept est inc ltd co corp
jan feb mar apr jun jul aug sep sept oct nov dec mt ft
""".split())
_END = re.compile(r'([.!?…。！？]+)(["\'”’)\]]*)(\s+|$)')


def _ends_sentence(text: str, start: int, punct: str) -> bool:
    if punct != ".":
        return True
    word = re.search(r"([\w.]+)$", text[:start])
    if not word:
        return True
    token = word.group(1).lower().rstrip(".")
    if token in _ABBREVIATIONS:
        return False
    return not (len(token) == 1 and token.isalpha())   # an initial: "J. R. R. Tolkien"


def split_sentences(text: str, min_chars: int = 8) -> list[str]:
    """Sentences of ``text`` with surrounding space removed; fragments shorter than
    ``min_chars`` are joined to the sentence before them."""
    pieces: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        start = 0
        for m in _END.finditer(block):
            if m.end() == len(block) or _ends_sentence(block, m.start(), m.group(1)):
                pieces.append(block[start:m.end()].strip())
                start = m.end()
        pieces.append(block[start:].strip())
    out: list[str] = []
    for piece in (p for p in pieces if p):
        piece = " ".join(piece.split())
        if out and len(piece) < min_chars:
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out
