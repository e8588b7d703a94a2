"""One grammar engine per loaded bundle: the vocabulary given once, compiled grammars cached.

``GrammarSession`` (``LoadedPipeline.grammar()``) is what the rest of onnxpipe talks to. It
picks the engine for the backend from ``ENGINES`` (XGrammar's Python package natively,
``@mlc-ai/web-xgrammar`` in the browser worker: both 0.1.27, the same C++ core, so the same
masks), hands it the bundle's vocabulary on first use, compiles each ``Constraint`` once
(timed: ``compile_ms``) and makes a fresh ``Matcher`` per generation.

An engine implements:

- ``Engine(vocabulary)``; ``compile(constraint) -> compiled`` (raises GrammarError with the
  engine's message when it cannot);
- ``matcher(compiled, stop_ids, rows) -> Matcher``.

A ``Matcher`` follows one generation: ``fill(row)`` writes the next token's allowed bitmask
into row ``row`` of its buffer, ``allowed(backend, rows)`` hands the first ``rows`` rows to the
sampler graph as an engine tensor uint32[rows, ceil(V / 32)], ``accept(token)`` advances (False
when the grammar refuses it), ``rollback(count)`` undoes accepted tokens (draft checking), and
``terminated`` is True once a stop id ended the grammar.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass

from .formats import Constraint
from .vocabulary import GrammarVocabulary

# backend name -> module that defines ``Engine`` (imported on first use: the native one needs
# the xgrammar package, the browser one the worker's JavaScript)
ENGINES = {"native": "onnxpipe.grammar.native", "web": "onnxpipe.grammar.web"}


@dataclass
class CompileInfo:
    kind: str
    compile_ms: float      # 0 when the compiled grammar came from the cache
    cached: bool
    vocabulary_ms: float   # giving the vocabulary to the engine (first constraint of a bundle only)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "compile_ms": round(self.compile_ms, 3), "cached": self.cached,
                "vocabulary_ms": round(self.vocabulary_ms, 3)}


class GrammarSession:
    def __init__(self, backend_name: str, vocabulary_loader):
        self.backend_name = backend_name
        self._load_vocabulary = vocabulary_loader
        self.engine = None
        self._compiled: dict[tuple, object] = {}

    def _engine(self) -> float:
        """Start the engine (once); returns the ms it took, 0 when already started."""
        if self.engine is not None:
            return 0.0
        module = importlib.import_module(ENGINES[self.backend_name])
        start = time.perf_counter()
        load = getattr(module, "load_vocabulary", None)   # an engine that keeps it (the browser's)
        vocabulary: GrammarVocabulary = load(self._load_vocabulary) if load else self._load_vocabulary()
        self.engine = module.Engine(vocabulary)
        return (time.perf_counter() - start) * 1000.0

    def compile(self, constraint: Constraint) -> tuple[object, CompileInfo]:
        vocabulary_ms = self._engine()
        found = self._compiled.get(constraint.key)
        if found is not None:
            return found, CompileInfo(constraint.kind, 0.0, True, vocabulary_ms)
        start = time.perf_counter()
        compiled = self.engine.compile(constraint)
        elapsed = (time.perf_counter() - start) * 1000.0
        if len(self._compiled) >= 64:   # bounded: drop the oldest
            self._compiled.pop(next(iter(self._compiled)))
        self._compiled[constraint.key] = compiled
        return compiled, CompileInfo(constraint.kind, elapsed, False, vocabulary_ms)

    def matcher(self, compiled, stop_ids, rows: int = 1):
        return self.engine.matcher(compiled, tuple(sorted(stop_ids)), rows)
