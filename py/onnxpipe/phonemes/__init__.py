"""Text -> phoneme ids (``preprocessing.phonemes``), the same natively and in the browser.

    phonemizer = load_phonemizer(bundle_dir, spec)                      # native: espeak-ng CLI
    phonemizer = load_phonemizer(bundle_dir, spec, engine=WebEspeak())  # browser (phonemes/web.py)
    for s in phonemizer.sentences("Hello, world! How are you?"):
        s.text, s.phonemes, s.ids

Only the engine differs between the two sides; splitting, punctuation, normalization and the
id mapping are rules.py on both (docs/tts-findings.md §2-3).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass

from ..errors import ConfigError, EngineError, InputError
from .engines import ENGINES, SPEC_PATH
from .rules import assemble, clean, normalize, split_text, to_ids

__all__ = ["PhonemeSentence", "Phonemizer", "load_phonemizer", "load_id_map"]


@dataclass(frozen=True)
class PhonemeSentence:
    text: str          # the sentence's source text (whitespace collapsed)
    phonemes: str      # what was mapped: normalized IPA with Piper's punctuation
    ids: list[int]     # bos pad (phoneme pad)* eos


def load_id_map(bundle_dir: str, ref: str) -> dict[str, list[int]]:
    """The map named by ``ref`` ("file.json" or "file.json#member") in the bundle."""
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
        raise ConfigError(f"expected {label} to be an object mapping phonemes to lists of ids, found "
                          f"{json.dumps(data)[:80]}", file=path, path=where)
    for key, ids in data.items():
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ConfigError(f'expected a list of integer ids for phoneme "{key}" in {label}, found '
                              f"{json.dumps(ids)[:80]}", file=path, path=where)
    return data


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
        symbol = getattr(self.spec, name)
        if symbol is None:
            return []
        if symbol not in self.id_map:
            raise ConfigError(f'{name} symbol "{symbol}" is not in the id map ({self.spec.id_map})',
                              path=f"{SPEC_PATH}.{name}")
        return list(self.id_map[symbol])

    def _speaks(self, phonemes: str) -> bool:
        return any(c in self.id_map and not c.isspace() and c not in self._marks for c in phonemes)

    def sentences(self, text: str) -> list[PhonemeSentence]:
        if not isinstance(text, str) or not text.strip():
            raise InputError("text: expected some words to speak, found an empty text")
        spec = self.spec
        self.warnings = list(self._load_warnings)
        chunked = split_text(text, spec.clause_punctuation, spec.sentence_punctuation)
        flat = [chunk.text for sentence in chunked for chunk in sentence]
        raws = list(self.engine.phonemize(spec.voice, flat)) if flat else []
        if len(raws) != len(flat):
            raise EngineError(f"phonemizer {spec.engine}: expected {len(flat)} outputs, found {len(raws)}")
        pending = iter(raws)
        out, dropped, skipped = [], Counter(), []
        for sentence in chunked:
            source = " ".join(chunk.text for chunk in sentence)
            parts = [(clean(next(pending)), chunk.terminator) for chunk in sentence]
            phonemes = normalize(assemble(parts, spec.clause_punctuation), spec.normalize)
            ids, missing = to_ids(phonemes, self.id_map, self._bos, self._eos, self._pad)
            if missing and spec.unknown == "error":
                c = missing[0]
                raise InputError(f'text: phoneme "{c}" (U+{ord(c):04X}) of the sentence {source!r} is not in the '
                                 f'id map {spec.id_map}; set {SPEC_PATH}.unknown to "drop" to leave it out')
            dropped.update(missing)
            if not self._speaks(phonemes):
                skipped.append(source)
                continue
            out.append(PhonemeSentence(source, phonemes, ids))
        if dropped:
            listed = ", ".join(f'"{c}" U+{ord(c):04X} ({n}x)' for c, n in dropped.most_common())
            self.warnings.append(f"phonemes missing from the id map {spec.id_map} were left out: {listed}")
        if not out:
            raise InputError(f"text: nothing to speak in {text.strip()[:80]!r}: the phonemizer found no "
                             "sounds in it (only punctuation, symbols or spaces?)")
        if skipped:
            self.warnings.append("skipped, nothing to speak: " + ", ".join(repr(s[:40]) for s in skipped))
        return out


def load_phonemizer(bundle_dir: str, spec, engine=None) -> Phonemizer:
    """The phonemizer ``spec`` (a PhonemesPreprocessing) declares; ``engine`` replaces the
    native one (the browser passes phonemes.web.WebEspeak())."""
    bundle_dir = os.fspath(bundle_dir)
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
