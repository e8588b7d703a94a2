"""Text -> phoneme ids (``preprocessing.phonemes``), the same natively and in the browser.

    phonemizer = load_phonemizer(bundle_dir, spec)                      # native: espeak-ng CLI
    phonemizer = load_phonemizer(bundle_dir, spec, engine=WebEspeak())  # browser (phonemes/web.py)
    for s in phonemizer.sentences("Hello, world! How are you?"):
        s.text, s.phonemes, s.ids

Only the engine differs between the two sides; splitting, punctuation, normalization and the
id mapping are rules.py on both (notes/2026-11-21-tts-findings.md §2-3).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field

from ..errors import ConfigError, EngineError, InputError
from .engines import ENGINES, SPEC_PATH
from .rules import assemble, clean, normalize, split_text, to_ids

__all__ = ["PhonemeSentence", "Phonemizer", "load_phonemizer", "load_id_map"]


@dataclass(frozen=True)
class PhonemeSentence:
    text: str          # the sentence's source text (whitespace collapsed)
    phonemes: str      # what was mapped: normalized IPA with Piper's punctuation
    ids: list[int]     # bos pad (phoneme pad)* eos (no pads when pad is null)
    # another sentence follows (its audio wants the sentence pause first); False at the end and
    # after a clause cut off as the lead piece (the voice pauses there by itself)
    pause_after: bool = field(default=False, compare=False)


def _is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_id_map(bundle_dir: str, ref: str) -> dict[str, list[int]]:
    """The map named by ``ref`` ("file.json" or "file.json#member") in the bundle, each phoneme's
    ids as a list: Piper's maps give lists, others (Kokoro's vocab) one id per phoneme."""
    where = f"{SPEC_PATH}.id_map"
    name, _, member = ref.partition("#")
    path = os.path.join(os.fspath(bundle_dir), name)
    if not name or not os.path.isfile(path):
        raise ConfigError("expected a JSON file of phoneme ids, found no such file", file=path, path=where)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"expected JSON, found a syntax error: {exc}", file=path, path=where) from None
    if member:
        if not isinstance(data, dict) or member not in data:
            found = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
            raise ConfigError(f'expected a member "{member}", found {found or "an empty object"}',
                              file=path, path=where)
        data = data[member]
    label = f'"{member}"' if member else "the file"
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"expected {label} to be an object mapping phonemes to ids, found "
                          f"{json.dumps(data)[:80]}", file=path, path=where)
    out = {}
    for key, ids in data.items():
        if _is_id(ids):
            ids = [ids]
        if not isinstance(ids, list) or not all(_is_id(i) for i in ids):
            raise ConfigError(f'expected an integer id or a list of them for phoneme "{key}" in {label}, '
                              f"found {json.dumps(ids)[:80]}", file=path, path=where)
        out[key] = ids
    return out


class Phonemizer:
    """Splits text into sentences and turns each into ids; ``warnings`` holds the load's
    warnings plus those of the latest sentences() call."""

    def __init__(self, spec, id_map: dict[str, list[int]], engine, warnings: list[str] | None = None):
        self.spec = spec
        self.id_map = id_map
        self.engine = engine
        self._load_warnings = list(warnings or [])
        self.warnings = list(self._load_warnings)
        self._marks = set(spec.clause_punctuation + spec.sentence_punctuation)
        self._bos, self._eos, self._pad = (self._symbol(name) for name in ("bos", "eos", "pad"))

    def _symbol(self, name: str) -> list[int]:
        """The ids of the bos / eos / pad setting: a symbol of the map, or ids given as they are."""
        symbol = getattr(self.spec, name)
        if symbol is None:
            return []
        if isinstance(symbol, tuple):
            return list(symbol)
        if symbol not in self.id_map:
            raise ConfigError(f'{name} symbol "{symbol}" is not in the id map ({self.spec.id_map})',
                              path=f"{SPEC_PATH}.{name}")
        return list(self.id_map[symbol])

    def _speaks(self, phonemes: str) -> bool:
        return any(c in self.id_map and not c.isspace() and c not in self._marks for c in phonemes)

    def sentences(self, text: str) -> list[PhonemeSentence]:
        return list(self.iter_sentences(text))

    def iter_sentences(self, text: str, lead: int = 0, lead_min: int = 0):
        """The sentences of ``text`` as they are phonemized: the first alone (so its audio can
        start before the rest is phonemized), then the rest in one engine call. With ``lead`` >
        0, a first sentence of more phonemes than that (counted in its phoneme string, the same
        for every voice's id scheme) is cut after its first clauses (as few as make ``lead_min``
        phonemes) so the first audio comes sooner; the cut is between clauses, where the voice
        pauses anyway. ``warnings`` is complete once the
        iteration ends; a text with nothing to speak raises at the end."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("text: expected some words to speak, found an empty text")
        spec = self.spec
        self.warnings = list(self._load_warnings)
        chunked = split_text(text, spec.clause_punctuation, spec.sentence_punctuation)
        dropped: Counter = Counter()
        skipped: list[str] = []
        made = 0
        for number, batch in enumerate((chunked[:1], chunked[1:])):
            flat = [chunk.text for sentence in batch for chunk in sentence]
            raws = list(self.engine.phonemize(spec.voice, flat)) if flat else []
            if len(raws) != len(flat):
                raise EngineError(f"phonemizer {spec.engine}: expected {len(flat)} outputs, found {len(raws)}")
            pending = iter(raws)
            pieces = []
            for sentence in batch:
                parts = [(clean(next(pending)), chunk.terminator) for chunk in sentence]
                pieces.extend((chunks, parts, True) for chunks, parts in self._fit(sentence, parts))
            if number == 0 and lead > 0 and pieces:
                cut = self._lead(*pieces[0][:2], lead, lead_min)
                pieces[:1] = [(chunks, parts, i == len(cut) - 1) for i, (chunks, parts) in enumerate(cut)]
            made_here = [(self._piece(chunks, parts, dropped, skipped), pause) for chunks, parts, pause in pieces]
            spoken = [(s, pause) for s, pause in made_here if s is not None]
            # the rest of the text is not phonemized yet: a sentence with a letter or digit follows
            more = number == 0 and any(any(c.isalnum() for chunk in sentence for c in chunk.text)
                                       for sentence in chunked[1:])
            for i, (sentence, pause) in enumerate(spoken):
                made += 1
                yield PhonemeSentence(sentence.text, sentence.phonemes, sentence.ids,
                                      pause_after=pause and (i < len(spoken) - 1 or more))
        if dropped:
            listed = ", ".join(f'"{c}" U+{ord(c):04X} ({n}x)' for c, n in dropped.most_common())
            self.warnings.append(f"phonemes missing from the id map {spec.id_map} were left out: {listed}")
        if not made:
            raise InputError(f"text: nothing to speak in {text.strip()[:80]!r}: the phonemizer found no "
                             "sounds in it (only punctuation, symbols or spaces?)")
        if skipped:
            self.warnings.append("skipped, nothing to speak: " + ", ".join(repr(s[:40]) for s in skipped))

    def _piece(self, chunks: list, parts: list, dropped: Counter, skipped: list) -> PhonemeSentence | None:
        """One piece's ids, checked; None (and noted in ``skipped``) when it has no sounds."""
        spec = self.spec
        source = " ".join(chunk.text for chunk in chunks)
        phonemes, ids, missing = self._ids(parts)
        if spec.max_ids and len(ids) > spec.max_ids:
            raise InputError(f"text: {source[:60]!r} makes {len(ids)} phoneme ids with no clause "
                             f"punctuation to split it at; this voice takes at most {spec.max_ids} "
                             f"({SPEC_PATH}.max_ids): add a comma or a full stop")
        if missing and spec.unknown == "error":
            c = missing[0]
            raise InputError(f'text: phoneme "{c}" (U+{ord(c):04X}) of the sentence {source!r} is not in the '
                             f'id map {spec.id_map}; set {SPEC_PATH}.unknown to "drop" to leave it out')
        dropped.update(missing)
        if not self._speaks(phonemes):
            skipped.append(source)
            return None
        return PhonemeSentence(source, phonemes, ids)

    def _lead(self, chunks: list, parts: list, lead: int, lead_min: int) -> list[tuple[list, list]]:
        """The piece cut in two after its first clauses that make ``lead_min`` phonemes, when it
        has more than ``lead`` phonemes and a clause is left after the cut; else unchanged."""
        if len(parts) < 2 or len(self._ids(parts)[0]) <= lead:
            return [(chunks, parts)]
        for cut in range(1, len(parts)):
            if len(self._ids(parts[:cut])[0]) >= lead_min:
                return [(chunks[:cut], parts[:cut]), (chunks[cut:], parts[cut:])]
        return [(chunks, parts)]

    def _ids(self, parts: list[tuple[str, str]]) -> tuple[str, list[int], list[str]]:
        phonemes = normalize(assemble(parts, self.spec.clause_punctuation), self.spec.normalize)
        ids, missing = to_ids(phonemes, self.id_map, self._bos, self._eos, self._pad)
        return phonemes, ids, missing

    def _fit(self, chunks: list, parts: list[tuple[str, str]]) -> list[tuple[list, list]]:
        """The sentence as (chunks, parts) pieces of at most ``max_ids`` ids each, cut between
        clauses (greedily: each piece takes as many clauses as fit); one piece when it fits."""
        limit = self.spec.max_ids
        if not limit or len(self._ids(parts)[1]) <= limit:
            return [(chunks, parts)]
        out: list[tuple[list, list]] = []
        for chunk, part in zip(chunks, parts):
            if out and len(self._ids(out[-1][1] + [part])[1]) <= limit:
                out[-1][0].append(chunk)
                out[-1][1].append(part)
            else:
                out.append(([chunk], [part]))
        return out


def load_phonemizer(bundle_dir: str, spec, engine=None) -> Phonemizer:
    """The phonemizer ``spec`` (a PhonemesPreprocessing) declares; ``engine`` replaces the
    native one (the browser passes phonemes.web.WebEspeak())."""
    bundle_dir = os.fspath(bundle_dir)
    if spec.max_ids < 0:
        raise ConfigError(f"expected 0 (no limit) or more ids, found {spec.max_ids}", path=f"{SPEC_PATH}.max_ids")
    id_map = load_id_map(bundle_dir, spec.id_map)
    warnings: list[str] = []
    if engine is None:
        factory = ENGINES.get(spec.engine)
        if factory is None:
            raise ConfigError(f'expected one of {", ".join(ENGINES)}, found "{spec.engine}"',
                              path=f"{SPEC_PATH}.engine")
        engine = factory(bundle_dir, spec, warnings)
    phonemizer = Phonemizer(spec, id_map, engine, warnings)
    engine.check(spec.voice)
    return phonemizer
