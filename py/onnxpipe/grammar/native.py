"""The native grammar engine: XGrammar's Python package (pinned to the web package's version).

Imported only when a call constrains its output: xgrammar imports torch (~3 s), and a bundle
that never uses a grammar never pays for it.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .formats import Constraint, GrammarError
from .vocabulary import GrammarVocabulary

try:
    import xgrammar as xgr
except ImportError as exc:   # an optional dependency of the native package
    raise InputError("constrained output (response_format, regex, grammar, tool_choice) needs the grammar "
                     "engine: pip install --no-deps xgrammar==0.1.27 pydantic (it also needs torch)") from exc

# JSON as these grammars fix it: one line, the separators of json.dumps
SEPARATORS = (", ", ": ")
JSON_OBJECT = '{"type": "object"}'   # what {"type": "json_object"} compiles


class Engine:
    def __init__(self, vocabulary: GrammarVocabulary):
        self.vocabulary = vocabulary
        info = xgr.TokenizerInfo(list(vocabulary.encoded), getattr(xgr.VocabType, vocabulary.vocab_type),
                                 vocab_size=vocabulary.vocab_size, stop_token_ids=list(vocabulary.stop_ids) or None,
                                 add_prefix_space=vocabulary.add_prefix_space)
        self.compiler = xgr.GrammarCompiler(info, cache_enabled=False)   # GrammarSession caches

    def compile(self, c: Constraint):
        try:
            if c.kind == "json_object":   # an object, written as json.dumps writes it
                return self.compiler.compile_json_schema(JSON_OBJECT, any_whitespace=False, indent=None,
                                                         separators=SEPARATORS, strict_mode=False)
            if c.kind == "json_schema":
                return self.compiler.compile_json_schema(c.source, any_whitespace=False, indent=None,
                                                         separators=SEPARATORS, strict_mode=c.strict)
            if c.kind == "regex":
                return self.compiler.compile_structural_tag(
                    '{"type": "structural_tag", "format": {"type": "regex", "pattern": %s}}' % _quote(c.source))
            if c.kind == "grammar":
                return self.compiler.compile_grammar(c.source, root_rule_name="root")
            if c.kind == "structural_tag":
                return self.compiler.compile_structural_tag(c.source)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise GrammarError(f"{c.field}: the grammar engine (XGrammar) cannot compile it: "
                               f"{_first_line(exc)}") from None
        raise GrammarError(f"{c.field}: unknown constraint kind {c.kind!r}")

    def matcher(self, compiled, stop_ids: tuple[int, ...], rows: int) -> "Matcher":
        return Matcher(compiled, stop_ids, rows, self.vocabulary.vocab_size)


def _quote(text: str) -> str:
    import json
    return json.dumps(text, ensure_ascii=False)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Matcher:
    def __init__(self, compiled, stop_ids, rows: int, vocab_size: int):
        # rollback (draft checking) is unlimited in XGrammar >= 0.1.2x: no max_rollback_tokens
        self._m = xgr.GrammarMatcher(compiled, override_stop_tokens=list(stop_ids) or None)
        self._mask = xgr.allocate_token_bitmask(rows, vocab_size)
        self._words = self._mask.numpy().view(np.uint32)   # shares the buffer

    def fill(self, row: int = 0) -> None:
        self._m.fill_next_token_bitmask(self._mask, row)

    def allowed(self, backend, rows: int = 1):
        return backend.tensor(self._words[:rows], "uint32", self._words[:rows].shape)

    def accept(self, token: int) -> bool:
        return bool(self._m.accept_token(int(token)))

    def rollback(self, count: int) -> None:
        if count:
            self._m.rollback(count)

    @property
    def terminated(self) -> bool:
        return bool(self._m.is_terminated())
