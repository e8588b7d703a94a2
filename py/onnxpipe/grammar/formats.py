"""What a call constrains its output to, read from OpenAI's ``response_format`` and our extras.

``constraint_from(value, field)`` turns a ``response_format`` object into a ``Constraint`` (or
None for ``{"type": "text"}``), checking every key and naming the field it is wrong in:

- ``{"type": "json_object"}``: any JSON object (XGrammar's built-in JSON grammar);
- ``{"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}``: JSON
  matching the schema. ``strict: true`` also forbids properties and items the schema does not
  name (OpenAI's strict mode, XGrammar's strict_mode); otherwise the schema reads as JSON Schema
  does (extra properties where it allows them);
- onnxpipe extras: ``{"type": "regex", "regex": PATTERN}`` and ``{"type": "grammar", "grammar":
  EBNF, "syntax": "ebnf"}`` (XGrammar's EBNF, root rule ``root``; Lark is not taken: the engine
  reads EBNF only).

A ``Constraint`` is plain data (kind + source text) so that the native and the browser engine
compile the very same thing (grammar/engine.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

# OpenAI's rule for json_schema.name
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
KINDS = ("json_object", "json_schema", "regex", "grammar", "structural_tag")


class GrammarError(InputError):
    """A constraint the caller gave is malformed or the grammar engine cannot compile it."""


@dataclass(frozen=True)
class Constraint:
    kind: str                  # one of KINDS
    source: str                # json_schema: the schema as JSON text; regex: the pattern;
                               # grammar: EBNF; structural_tag: its JSON; json_object: ""
    field: str = "response_format"   # where the caller gave it (error messages)
    name: str | None = None    # json_schema.name
    strict: bool = False       # json_schema.strict
    schema: Any = None         # json_schema: the parsed schema (callers validate output with it)

    @property
    def key(self) -> tuple:
        """What the compiled grammar depends on (a compile cache key)."""
        return (self.kind, self.source, self.strict)

    def to_wire(self) -> dict:
        """The plain dict the browser's engine compiles (workers/grammar.ts reads it)."""
        return {"kind": self.kind, "source": self.source, "strict": self.strict}


def _keys(value: dict, allowed: tuple[str, ...], field: str) -> None:
    extra = sorted(set(value) - set(allowed))
    if extra:
        raise GrammarError(f"{field}: unknown key {extra[0]!r}; expected {', '.join(allowed)}")


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise GrammarError(f"{field}: expected a non-empty string, found {value!r:.60}")
    return value


def constraint_from(value: Any, field: str = "response_format") -> Constraint | None:
    """The Constraint ``response_format`` asks for; None for plain text (no constraint)."""
    if value is None:
        return None
    if isinstance(value, Constraint):
        return value
    if not isinstance(value, dict):
        raise GrammarError(f"{field}: expected an object such as {{\"type\": \"json_object\"}}, "
                           f"found {type(value).__name__}")
    kind = value.get("type")
    if kind == "text":
        _keys(value, ("type",), field)
        return None
    if kind == "json_object":
        _keys(value, ("type",), field)
        return Constraint("json_object", "", field)
    if kind == "json_schema":
        _keys(value, ("type", "json_schema"), field)
        return _json_schema(value.get("json_schema"), f"{field}.json_schema")
    if kind == "regex":
        _keys(value, ("type", "regex"), field)
        return Constraint("regex", _text(value.get("regex"), f"{field}.regex"), field)
    if kind == "grammar":
        _keys(value, ("type", "grammar", "syntax"), field)
        syntax = value.get("syntax", "ebnf")
        if syntax != "ebnf":
            raise GrammarError(f"{field}.syntax: the grammar engine (XGrammar) reads \"ebnf\" only, "
                               f"found {syntax!r}")
        return Constraint("grammar", _text(value.get("grammar"), f"{field}.grammar"), field)
    raise GrammarError(f"{field}.type: expected one of text, json_object, json_schema, regex, grammar; "
                       f"found {kind!r:.40}")


def _json_schema(spec: Any, field: str) -> Constraint:
    if not isinstance(spec, dict):
        raise GrammarError(f"{field}: expected an object with name and schema, found {type(spec).__name__}")
    _keys(spec, ("name", "schema", "strict", "description"), field)
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise GrammarError(f"{field}.name: expected 1-64 letters, digits, _ or -, found {name!r:.60}")
    if "description" in spec and not isinstance(spec["description"], str):
        raise GrammarError(f"{field}.description: expected a string")
    strict = spec.get("strict", False)
    if strict is None:
        strict = False
    if not isinstance(strict, bool):
        raise GrammarError(f"{field}.strict: expected true or false, found {strict!r:.40}")
    schema = spec.get("schema", {})   # OpenAI: an absent schema is the empty one (any JSON)
    if not isinstance(schema, (dict, bool)):
        raise GrammarError(f"{field}.schema: expected a JSON Schema object, found {type(schema).__name__}")
    try:
        # key order kept: the engine writes properties in the schema's order (as OpenAI does)
        source = json.dumps(schema, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise GrammarError(f"{field}.schema: not JSON data: {exc}") from None
    return Constraint("json_schema", source, f"{field}.schema", name, strict, schema)


def regex_constraint(pattern: Any, field: str = "regex") -> Constraint:
    return Constraint("regex", _text(pattern, field), field)


def grammar_constraint(ebnf: Any, field: str = "grammar") -> Constraint:
    return Constraint("grammar", _text(ebnf, field), field)


def structural_tag_constraint(tag: dict, field: str) -> Constraint:
    """A structural tag (XGrammar's JSON form): used for tool calls (grammar/tools.py)."""
    return Constraint("structural_tag", json.dumps(tag, ensure_ascii=False), field)
