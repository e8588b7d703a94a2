"""Piper's phonemization rules, shared by the native and the browser phonemizer.

The text is split into clauses *here*, not by espeak, so both sides hand the engine the same
chunks and put the same punctuation back (notes/2026-11-21-tts-findings.md §2.2, §3.3). The split mirrors
espeak-ng's own clause rule closely enough to keep Piper's ids where they agree:

- a clause ends at a run of clause/sentence punctuation (plus closing quotes or brackets)
  followed by whitespace or the end of the text;
- a lone "." followed by a lower-case word does not end one ("St. in", "U.S.A. and"), nor does
  punctuation before any letter or digit of the clause;
- a blank line ends the sentence.

Pure Python: this module runs in Pyodide as well as in CPython.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_CLOSERS = "\"'”’»)]}"
_LANG_FLAG = re.compile(r"\([^()]*\)")   # espeak's "(en)" language-switch marks; Piper drops them
_SPACES = re.compile(r"\s+")
_DOUBLE_BRACKET = re.compile(r"\[(?=\[)")


@dataclass(frozen=True)
class Chunk:
    text: str            # what the engine phonemizes: one line, its punctuation included
    terminator: str      # punctuation put back after its phonemes ("" for none)
    ends_sentence: bool


def _one_line(text: str) -> str:
    # one line per chunk (the native engine sends one chunk per line); no control characters;
    # "[[" would switch the espeak CLI (not the browser build) to phoneme input
    text = "".join(c for c in text if unicodedata.category(c) != "Cc" or c.isspace())
    return " ".join(_DOUBLE_BRACKET.sub("[ ", text).split())


def split_text(text: str, clause_punct: str = ",;:", sentence_punct: str = ".!?") -> list[list[Chunk]]:
    """Sentences of ``text``, each a list of clause chunks (possibly empty of words)."""
    marks = "".join(dict.fromkeys(clause_punct + sentence_punct))
    end = re.compile(f"([{re.escape(marks)}]+)([{re.escape(_CLOSERS)}]*)(?=\\s|$)") if marks else None
    sentences: list[list[Chunk]] = []
    for paragraph in re.split(r"\n\s*\n", text):
        line = _one_line(paragraph)
        current: list[Chunk] = []
        start = 0
        for m in (end.finditer(line) if end else ()):
            run = m.group(1)
            if not any(c.isalnum() for c in line[start:m.start()]):
                continue
            after = line[m.end():].lstrip()
            if run == "." and after[:1].islower():
                continue
            current.append(Chunk(line[start:m.end()].strip(), run[-1], run[-1] in sentence_punct))
            start = m.end()
            if current[-1].ends_sentence:
                sentences.append(current)
                current = []
        rest = line[start:].strip()
        if rest:
            current.append(Chunk(rest, "", True))
        if current:
            sentences.append(current)
    return sentences


def clean(raw: str) -> str:
    """One chunk's engine output as plain IPA: no "_" separators (the browser build puts them
    between phonemes and at pauses), no language flags, espeak's clause lines joined by a space."""
    text = _LANG_FLAG.sub("", raw.replace("_", ""))
    return _SPACES.sub(" ", text).strip()


def assemble(parts: list[tuple[str, str]], clause_punct: str = ",;:") -> str:
    """A sentence's phonemes from (clause phonemes, terminator) pairs, by Piper's rule:
    ", ; :" are followed by a space, ". ! ?" are not, and clauses are joined with nothing.
    A clause with no phonemes loses its punctuation too."""
    out = []
    for phonemes, terminator in parts:
        if not phonemes:
            continue
        out.append(phonemes + terminator + (" " if terminator and terminator in clause_punct else ""))
    return "".join(out)


def normalize(phonemes: str, form: str) -> str:
    return phonemes if form == "none" else unicodedata.normalize(form, phonemes)


def to_ids(phonemes: str, id_map: dict[str, list[int]], bos: list[int], eos: list[int],
           pad: list[int]) -> tuple[list[int], list[str]]:
    """``bos pad (p pad)* eos`` over the codepoints of ``phonemes``; codepoints missing from the
    map are left out (no pad either) and returned second, in order."""
    ids = list(bos) + list(pad)
    missing = []
    for c in phonemes:
        found = id_map.get(c)
        if found is None:
            missing.append(c)
            continue
        ids.extend(found)
        ids.extend(pad)
    ids.extend(eos)
    return ids, missing
