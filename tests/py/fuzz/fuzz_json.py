"""Hypothesis strategies that mutate a valid JSON document (a bundle's pipeline.json).

A mutation picks a node by its path and drops, renames, adds, retypes, wraps/unwraps, swaps a
string for another one the bundles use (another session, tensor, phase, preset, file, dtype: a
broken wire or flow step), misspells it, or pushes a number out of range. Strings come from a
vocabulary gathered from every bundle under test, so most mutations stay close to valid.
"""

from __future__ import annotations

import copy
import math

from hypothesis import strategies as st

from onnxpipe.config.presets import PRESETS
from onnxpipe.config.schema import DTYPES, FLOW_PHASES
from onnxpipe.loops import LOOPS

EXTREME_NUMBERS = (0, -1, 1, 2, -2**31, 2**31, 2**53 + 1, 2**63, -2**63, 2**64, 10**30, 0.5, -0.5,
                   1e-320, 1e308, -1e308, math.inf, -math.inf, math.nan)
WEIRD_TEXT = ("", " ", "../model.onnx", "/etc/passwd", "a.b.c", ".", "..", "x" * 300, "\u0000",
              "é", "🙂", "outputs.", ".logits", "inputs.input_ids", "{layer}", "%s", "$.x")
BUILT_IN = (tuple(PRESETS) + tuple(LOOPS) + FLOW_PHASES + DTYPES
            + ("per_image", "shared_buffer", "separate", "auto", "cpu", "wasm", "webgpu", "default"))


def vocabulary(documents) -> tuple[str, ...]:
    """Every key and string value in ``documents``, plus the runtime's built-in names."""
    found: set[str] = set(BUILT_IN)

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                found.add(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and len(node) < 200:
            found.add(node)

    for doc in documents:
        walk(doc)
    return tuple(sorted(found))


def node_paths(doc) -> list[tuple]:
    """Paths (keys / indices) of every node below the root, depth first."""
    out: list[tuple] = []

    def walk(node, path):
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            out.append(path + (key,))
            walk(value, path + (key,))

    walk(doc, ())
    return out


def _parent(doc, path):
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


def typo(word: str, data) -> str:
    if not word:
        return "x"
    i = data.draw(st.integers(0, len(word) - 1))
    how = data.draw(st.sampled_from(("drop", "double", "swap", "upper", "suffix")))
    if how == "drop":
        return word[:i] + word[i + 1:]
    if how == "double":
        return word[:i] + word[i] + word[i:]
    if how == "swap" and i + 1 < len(word):
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if how == "upper":
        return word.upper()
    return word + "_"


def words(vocab) -> st.SearchStrategy:
    """One of ``vocab`` (drawn by index: Hypothesis' statistics print a strategy's repr)."""
    return st.integers(0, len(vocab) - 1).map(vocab.__getitem__)


def json_values(vocab) -> st.SearchStrategy:
    """Any JSON value (NaN and infinities too: Python's json reads and writes them), nested
    one level: deeper nesting only adds more of the same kind of error."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.sampled_from(EXTREME_NUMBERS), st.floats(allow_nan=True, allow_infinity=True),
                        words(vocab), st.sampled_from(WEIRD_TEXT), st.text(max_size=12))
    keys = st.one_of(words(vocab), st.text(max_size=8))
    return st.one_of(scalars, st.lists(scalars, max_size=4),
                     st.lists(st.tuples(keys, scalars), max_size=4).map(dict))


def out_of_range(value, data):
    if isinstance(value, bool):
        return data.draw(st.sampled_from((not value, 0, 1, "true")))
    factor = data.draw(st.sampled_from((-1, 0, 2, 1000, 1e9, 0.5, math.nan, math.inf)))
    if data.draw(st.booleans()):
        return data.draw(st.sampled_from(EXTREME_NUMBERS))
    try:
        result = value * factor
    except OverflowError:
        return -value
    return int(result) if isinstance(value, int) and not isinstance(result, int) and math.isfinite(result) else result


OPS = ("drop", "rename", "add", "replace", "wrap", "unwrap", "swap_string", "typo", "number", "empty",
       "duplicate", "stringify")


def mutate_once(doc, vocab, data) -> str:
    """Apply one mutation to ``doc`` in place; return a short description of it."""
    paths = node_paths(doc)
    if not paths:
        doc["version"] = 2
        return "add version"
    path = data.draw(st.sampled_from(paths))
    parent, key = _parent(doc, path), path[-1]
    value = parent[key]
    op = data.draw(st.sampled_from(OPS))
    where = "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path)
    if op == "drop":
        del parent[key]
    elif op == "rename" and isinstance(parent, dict):
        new = data.draw(st.one_of(words(vocab), st.just(typo(key, data)), st.text(max_size=8)))
        parent[new] = parent.pop(key)
    elif op == "add":
        target = value if isinstance(value, (dict, list)) else parent
        new = data.draw(json_values(vocab))
        if isinstance(target, dict):
            target[data.draw(st.one_of(words(vocab), st.text(max_size=8)))] = new
        else:
            target.insert(data.draw(st.integers(0, len(target))), new)
    elif op == "wrap":
        parent[key] = [value]
    elif op == "unwrap" and isinstance(value, (list, dict)) and value:
        parent[key] = next(iter(value.values())) if isinstance(value, dict) else value[0]
    elif op == "swap_string" and isinstance(value, str):
        parent[key] = data.draw(st.one_of(words(vocab), st.sampled_from(WEIRD_TEXT)))
    elif op == "typo" and isinstance(value, str):
        parent[key] = typo(value, data)
    elif op == "number" and isinstance(value, (int, float)):
        parent[key] = out_of_range(value, data)
    elif op == "empty":
        parent[key] = type(value)() if isinstance(value, (list, dict, str)) else None
    elif op == "duplicate" and isinstance(value, list) and value:
        value.append(copy.deepcopy(value[data.draw(st.integers(0, len(value) - 1))]))
    elif op == "stringify" and not isinstance(value, (dict, list)):
        parent[key] = str(value)
    else:   # the op does not fit this node: put any other JSON value there
        op = "replace"
        parent[key] = data.draw(json_values(vocab))
    return f"{op} {where}"


@st.composite
def mutated(draw, doc, vocab, max_mutations: int = 3):
    """(mutated deep copy of ``doc``, descriptions of the mutations)."""
    data = _Drawer(draw)
    new = copy.deepcopy(doc)
    done = [mutate_once(new, vocab, data) for _ in range(draw(st.integers(1, max_mutations)))]
    return new, done


class _Drawer:
    """Lets mutate_once draw inside a composite strategy as it would from st.data()."""

    def __init__(self, draw):
        self.draw = draw


DROP = object()   # an edit that removes the key


def edited(doc, *edits, note: str = "regression"):
    """A case as ``mutated`` draws it, from fixed edits: (path, new value or DROP) each."""
    new = copy.deepcopy(doc)
    for path, value in edits:
        parent = _parent(new, path)
        if value is DROP:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    return new, [note]
