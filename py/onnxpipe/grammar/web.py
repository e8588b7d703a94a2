"""The browser's grammar engine: @mlc-ai/web-xgrammar 0.1.27 in the runtime worker
(workers/grammar.ts), reached through ``onnxpipe_js``; the same interface as grammar/native.py
and the same C++ core, so the same masks.

Masks stay in JavaScript: ``fill`` writes a row of the worker's Uint32Array and ``allowed``
hands the sampler graph an ort.Tensor of it, so no per-token list crosses into Python.
"""

from __future__ import annotations

import json

import onnxpipe_js  # type: ignore[import-not-found]  (workers/bridge.ts, Pyodide only)
from pyodide.ffi import JsException, run_sync, to_js  # type: ignore[import-not-found]

from .formats import Constraint, GrammarError
from .vocabulary import GrammarVocabulary, VocabularySource


def _message(exc: JsException) -> str:
    text = str(getattr(exc, "message", "") or exc)
    return text.removeprefix("Error: ").strip().splitlines()[0] if text.strip() else type(exc).__name__


def load_vocabulary(source) -> GrammarVocabulary:
    """The bundle's vocabulary: the copy kept next to the bundle in this device's storage, else
    read from tokenizer.json and kept there (workers/grammar.ts)."""
    if not isinstance(source, VocabularySource):
        return source()
    try:
        stored = run_sync(onnxpipe_js.storedVocabulary(source.bundle_path, source.inputs))
        if stored is not None:
            return VocabularySource.from_json(str(stored))
    except (JsException, ValueError, KeyError, TypeError):   # unreadable: read tokenizer.json again
        pass
    vocabulary = source()
    run_sync(onnxpipe_js.storeVocabulary(source.bundle_path, source.inputs, vocabulary.to_json()))
    return vocabulary


class Engine:
    def __init__(self, vocabulary: GrammarVocabulary):
        self.vocabulary = vocabulary
        try:
            self._js = run_sync(onnxpipe_js.grammarEngine(vocabulary.to_json()))
        except JsException as exc:
            raise GrammarError(f"the grammar engine (web-xgrammar) could not take the vocabulary: "
                               f"{_message(exc)}") from None

    def compile(self, c: Constraint):
        wire = json.dumps({"kind": c.kind, "source": c.source, "strict": bool(getattr(c, "strict", False)),
                           "field": c.field}, ensure_ascii=False)
        try:
            return Compiled(run_sync(self._js.compile(wire)))
        except JsException as exc:   # the worker's message names c.field already
            raise GrammarError(_message(exc)) from None

    def matcher(self, compiled: "Compiled", stop_ids: tuple[int, ...], rows: int) -> "Matcher":
        return Matcher(run_sync(self._js.matcher(compiled.js, to_js(list(stop_ids)), rows)))


class Compiled:
    """A compiled grammar in the worker's wasm heap, freed when GrammarSession drops it."""

    def __init__(self, js_compiled):
        self.js = js_compiled

    def __del__(self):
        _dispose(self.js)


def _dispose(handle) -> None:
    try:
        handle.dispose()
    except Exception:   # the worker already gone
        pass


class Matcher:
    def __init__(self, js_matcher):
        self._m = js_matcher

    def fill(self, row: int = 0) -> None:
        run_sync(self._m.fill(row))

    def allowed(self, backend, rows: int = 1):
        return self._m.allowed(rows)

    def accept(self, token: int) -> bool:
        return bool(self._m.accept(int(token)))

    def rollback(self, count: int) -> None:
        if count:
            self._m.rollback(count)

    @property
    def terminated(self) -> bool:
        return bool(self._m.isTerminated())

    def __del__(self):
        _dispose(self._m)
