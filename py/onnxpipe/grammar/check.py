"""Whether a finished constrained output really is what its constraint asked for.

The grammar engine guarantees the tokens follow the grammar it compiled, but its translation
of a JSON Schema into a grammar has known gaps (XGrammar 0.1.27: some integer ranges, e.g.
``"maximum": 120`` takes 121-129; strings with ``minLength`` / ``maxLength`` take raw control
characters; tests/py/grammar/test_constrained.py keeps both). So a JSON result is checked once
it ends: ``json.loads`` (strict: no raw control characters), then the schema with the
``jsonschema`` package where it is installed (natively; the browser worker has no validator
and reports ``None``, not checked). The result's ``grammar.valid`` says which: True, False
(with ``grammar.error``), or None.
"""

from __future__ import annotations

import json


def check_output(constraint, text: str) -> tuple[bool | None, str | None]:
    """(valid, why not) of a complete output; (None, None) where nothing can check it."""
    if constraint.kind not in ("json_object", "json_schema"):
        return None, None   # regex / grammar: the engine's own language, nothing else to check
    try:
        value = json.loads(text)
    except ValueError as exc:
        return False, f"not valid JSON: {exc}"
    if constraint.kind == "json_object":
        return (True, None) if isinstance(value, dict) else (False, "not a JSON object")
    try:
        import jsonschema
    except ImportError:
        return None, None
    try:
        jsonschema.validate(value, constraint.schema)
    except jsonschema.ValidationError as exc:
        return False, f"does not match the schema: {exc.message}"
    except jsonschema.SchemaError:
        return None, None   # a schema jsonschema can't read (the engine compiled it): unchecked
    return True, None
