"""response_format -> Constraint (grammar/formats.py): every shape it takes, and every error
naming the field it is wrong in."""

from __future__ import annotations

import json

import pytest

from onnxpipe.errors import InputError
from onnxpipe.grammar.formats import (Constraint, GrammarError, constraint_from, grammar_constraint,
                                      regex_constraint, structural_tag_constraint)

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def test_none_and_text_are_no_constraint():
    assert constraint_from(None) is None
    assert constraint_from({"type": "text"}) is None


def test_json_object():
    c = constraint_from({"type": "json_object"})
    assert (c.kind, c.source, c.field, c.strict) == ("json_object", "", "response_format", False)


def test_json_schema_with_every_key():
    c = constraint_from({"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA,
                                                                "strict": True, "description": "a person"}})
    assert (c.kind, c.name, c.strict, c.schema) == ("json_schema", "person", True, SCHEMA)
    assert json.loads(c.source) == SCHEMA
    assert c.field == "response_format.json_schema.schema"
    assert c.to_wire() == {"kind": "json_schema", "source": c.source, "strict": True}


def test_json_schema_defaults():
    c = constraint_from({"type": "json_schema", "json_schema": {"name": "x"}})
    assert (c.schema, c.source, c.strict) == ({}, "{}", False)   # OpenAI: no schema = any JSON
    assert constraint_from({"type": "json_schema", "json_schema": {"name": "x", "strict": None}}).strict is False
    assert constraint_from({"type": "json_schema", "json_schema": {"name": "x", "schema": True}}).source == "true"


def test_the_cache_key_ignores_the_name_but_not_strict_or_the_property_order():
    props = {"x": {"type": "integer"}, "y": {"type": "integer"}}
    a = constraint_from({"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object",
                                                                                       "properties": props}}})
    b = constraint_from({"type": "json_schema", "json_schema": {"name": "b", "schema": {"type": "object",
                                                                                       "properties": props}}})
    s = constraint_from({"type": "json_schema", "json_schema": {"name": "a", "strict": True,
                                                                "schema": {"type": "object", "properties": props}}})
    # the engine writes properties in the schema's order: another order is another grammar
    r = constraint_from({"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": dict(reversed(list(props.items())))}}})
    assert a.key == b.key and a.key != s.key and a.key != r.key


def test_regex_and_grammar_extras():
    r = constraint_from({"type": "regex", "regex": "[0-9]+"})
    assert (r.kind, r.source, r.field) == ("regex", "[0-9]+", "response_format")
    g = constraint_from({"type": "grammar", "grammar": 'root ::= "a"'})
    assert (g.kind, g.source) == ("grammar", 'root ::= "a"')
    assert constraint_from({"type": "grammar", "grammar": 'root ::= "a"', "syntax": "ebnf"}) == g
    assert regex_constraint("a|b").source == "a|b"
    assert grammar_constraint('root ::= "b"', "grammar").field == "grammar"


def test_a_constraint_passes_through_and_structural_tags_are_json():
    c = Constraint("regex", "x")
    assert constraint_from(c) is c
    tag = structural_tag_constraint({"type": "structural_tag", "format": {"type": "regex", "pattern": "x"}},
                                    "tool_choice")
    assert (tag.kind, tag.field) == ("structural_tag", "tool_choice")
    assert json.loads(tag.source)["format"]["pattern"] == "x"


@pytest.mark.parametrize("value, field, found", [
    ("json", "response_format", "str"),
    (["json_object"], "response_format", "list"),
    ({"type": "xml"}, r"response_format\.type", "'xml'"),
    ({}, r"response_format\.type", "None"),
    ({"type": "text", "schema": {}}, "response_format", "'schema'"),
    ({"type": "json_object", "schema": {}}, "response_format", "'schema'"),
    ({"type": "json_schema", "schema": {}}, "response_format", "'schema'"),
    ({"type": "json_schema"}, r"response_format\.json_schema", "NoneType"),
    ({"type": "json_schema", "json_schema": "x"}, r"response_format\.json_schema", "str"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {}, "strict": True, "extra": 1}},
     r"response_format\.json_schema", "'extra'"),
    ({"type": "json_schema", "json_schema": {"schema": {}}}, r"response_format\.json_schema\.name", "None"),
    ({"type": "json_schema", "json_schema": {"name": "has space"}}, r"response_format\.json_schema\.name",
     "'has space'"),
    ({"type": "json_schema", "json_schema": {"name": "x" * 65}}, r"response_format\.json_schema\.name", "xxx"),
    ({"type": "json_schema", "json_schema": {"name": ""}}, r"response_format\.json_schema\.name", "''"),
    ({"type": "json_schema", "json_schema": {"name": "x", "strict": "yes"}},
     r"response_format\.json_schema\.strict", "'yes'"),
    ({"type": "json_schema", "json_schema": {"name": "x", "strict": 1}},
     r"response_format\.json_schema\.strict", "1"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": "{}"}},
     r"response_format\.json_schema\.schema", "str"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}},
     r"response_format\.json_schema\.schema", "list"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"a": {1, 2}}}},
     r"response_format\.json_schema\.schema", "not JSON"),
    ({"type": "json_schema", "json_schema": {"name": "x", "description": 3}},
     r"response_format\.json_schema\.description", "string"),
    ({"type": "regex"}, r"response_format\.regex", "None"),
    ({"type": "regex", "regex": ""}, r"response_format\.regex", "''"),
    ({"type": "regex", "regex": 5}, r"response_format\.regex", "5"),
    ({"type": "regex", "regex": "a", "flags": "i"}, "response_format", "'flags'"),
    ({"type": "grammar", "grammar": "start: 'a'", "syntax": "lark"}, r"response_format\.syntax", "'lark'"),
    ({"type": "grammar", "grammar": ""}, r"response_format\.grammar", "''"),
    ({"type": "grammar"}, r"response_format\.grammar", "None"),
])
def test_every_error_names_its_field(value, field, found):
    with pytest.raises(GrammarError, match=rf"^{field}: .*{found}") as info:
        constraint_from(value)
    assert isinstance(info.value, InputError)   # the kind callers and the worker already know


def test_the_field_prefix_is_the_callers():
    with pytest.raises(GrammarError, match=r"^tool_choice\.type: "):
        constraint_from({"type": "nope"}, "tool_choice")
    with pytest.raises(GrammarError, match=r"^regex: "):
        regex_constraint("")
    with pytest.raises(GrammarError, match=r"^grammar: "):
        grammar_constraint(None)


def test_unknown_keys_list_the_expected_ones():
    with pytest.raises(GrammarError, match="expected type, json_schema$"):
        constraint_from({"type": "json_schema", "json_schema": {"name": "x"}, "strict": True})
    with pytest.raises(GrammarError, match="expected name, schema, strict, description$"):
        constraint_from({"type": "json_schema", "json_schema": {"name": "x", "Schema": {}}})
