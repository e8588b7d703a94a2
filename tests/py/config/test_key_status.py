"""docs/pipeline-json.md lists every key of pipeline.json (every field of config/schema.py) with
its status, so no key can be added without saying whether it works or is refused, and the page
lists no key that does not exist. A key marked "refused" must fail to load."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path

from onnxpipe.config import schema
from onnxpipe.config.parse import json_key

DOC = Path(__file__).resolve().parents[3] / "docs" / "pipeline-json.md"
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(works|refused|kept)\b[^|]*\|\s*(.*?)\s*\|\s*$")


def _nested(tp):
    """The dataclass a field holds (through Optional, tuple and dict values), and how."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        found = [_nested(a) for a in typing.get_args(tp) if a is not type(None)]
        return next((f for f in found if f[0] is not None), (None, ""))
    if origin is tuple:
        cls, _ = _nested(typing.get_args(tp)[0])
        return cls, "[]"
    if origin is dict:
        cls, _ = _nested(typing.get_args(tp)[1])
        return cls, ".*"
    return (tp, "") if dataclasses.is_dataclass(tp) else (None, "")


def schema_keys(cls=schema.PipelineSpec, prefix: str = "") -> list[str]:
    keys = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = prefix + json_key(f)
        keys.append(key)
        inner, how = _nested(hints[f.name])
        if inner is not None:
            keys += schema_keys(inner, f"{key}{how}.")
    return keys


def documented() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_every_key_has_a_status_and_every_row_is_a_key():
    keys, rows = schema_keys(), documented()
    missing = [k for k in keys if k not in rows]
    stale = [k for k in rows if k not in keys]
    assert not missing, f"keys with no status row in {DOC.name}: {missing}"
    assert not stale, f"rows in {DOC.name} for keys that do not exist: {stale}"


def test_a_working_key_names_where_it_is_tested():
    root = DOC.parents[1]
    for key, (status, where) in documented().items():
        if status != "works":
            continue
        files = re.findall(r"`((?:tests)/[^`]+)`", where)
        assert files, f"{key}: 'works' but no test file named"
        for f in files:
            assert (root / f.split("::")[0]).exists(), f"{key}: {f} does not exist"
