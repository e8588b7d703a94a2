"""JSON -> frozen dataclasses, generically, with errors that name the JSON path.

Types, defaults, choices, aliases and required keys all come from ``schema.py``'s field
metadata. A dataclass with an ``extra`` field keeps unknown keys there instead of failing.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from ..errors import ConfigError, choices_text, nearest

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def json_key(f: dataclasses.Field) -> str:
    return f.name.rstrip("_")


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is Any:
        return "any value"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is tuple:
        item = _type_name(typing.get_args(tp)[0])
        plural = {"a string": "strings", "an integer": "integers", "a number": "numbers",
                  "an object": "objects", "true or false": "booleans"}.get(item, item)
        return f"a list of {plural}"
    if origin is dict:
        return "an object"
    if dataclasses.is_dataclass(tp):
        return "an object"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(tp, str(tp))


def _one_or_many(options: tuple) -> Any:
    """``tuple[X, ...]`` when the union's options are X and a list of X (besides None): the
    JSON value's kind then picks the option, so an error names the key inside it."""
    real = [o for o in options if o is not type(None)]
    many = [o for o in real if typing.get_origin(o) is tuple]
    if len(real) == 2 and len(many) == 1 and dataclasses.is_dataclass(typing.get_args(many[0])[0]) \
            and typing.get_args(many[0])[0] in real:
        return many[0]
    return None


def describe(value: Any) -> str:
    """The value as it looks in JSON, with its JSON type: 'string "100"', 'boolean true'."""
    if value is None:
        return "null"
    kind = {bool: "boolean", int: "integer", float: "number", str: "string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
    if isinstance(value, (list, dict)):
        return kind
    return f"{kind} {json.dumps(value, ensure_ascii=False)[:80]}"


class Parser:
    """Parses one file; remembers its name for every error it raises."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, path=path)

    def build(self, cls: type, obj: Any, path: str) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(path, f"expected an object, found {describe(obj)}")
        hints = _hints(cls)
        fields = {json_key(f): f for f in dataclasses.fields(cls)}
        has_extra = "extra" in fields and "extra" not in obj
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, raw in obj.items():
            f = fields.get(key)
            if f is None or (key == "extra" and has_extra):
                if has_extra:
                    extra[key] = raw
                    continue
                hint = nearest(key, fields)
                tip = f' Did you mean "{hint}"?' if hint else ""
                raise self.fail(f"{path}.{key}", f'unknown key "{key}".{tip} '
                                f"Valid keys here: {choices_text(fields)}")
            values[f.name] = self.value(f, hints[f.name], raw, f"{path}.{key}")
        if extra:
            values["extra"] = extra
        for key, f in fields.items():
            if f.metadata.get("required") and f.name not in values:
                raise self.fail(f"{path}.{key}", f'missing required key "{key}" ({f.metadata["doc"]})')
        return cls(**values)

    def value(self, f: dataclasses.Field, tp: Any, raw: Any, path: str) -> Any:
        meta = f.metadata
        if meta.get("one_or_many") and not isinstance(raw, (list, dict)):
            raw = [raw]
        if isinstance(raw, str) and raw in meta.get("aliases", {}):
            raw = meta["aliases"][raw]
        out = self.convert(tp, raw, path)
        choices = meta.get("choices")
        if choices and out not in choices:
            hint = nearest(str(out), choices)
            tip = f' Did you mean "{hint}"?' if hint else ""
            what = " ".join(part for part in path.split(".")[-2:] if part != "$")
            raise self.fail(path, f'unknown {what} "{out}".{tip} Valid options: {", ".join(choices)}')
        return out

    def convert(self, tp: Any, raw: Any, path: str) -> Any:
        origin = typing.get_origin(tp)
        if tp is Any:
            return raw
        if origin in (typing.Union, types.UnionType):
            options = typing.get_args(tp)
            if raw is None and type(None) in options:
                return None
            one_or_many = _one_or_many(options)
            if one_or_many is not None:   # X | tuple[X, ...]: an object, or a list of them
                picked = one_or_many if isinstance(raw, list) else typing.get_args(one_or_many)[0]
                return self.convert(picked, raw, path)
            errors = []
            for option in options:
                if option is type(None):
                    continue
                try:
                    return self.convert(option, raw, path)
                except ConfigError as exc:
                    errors.append(exc)
            if len(errors) == 1:   # X | None: X's own error names the key inside it that is wrong
                raise errors[0]
            raise self.fail(path, f"expected {_type_name(tp)}, found {describe(raw)}")
        if origin is tuple:
            if not isinstance(raw, list):
                raise self.fail(path, f"expected {_type_name(tp)}, found {describe(raw)}")
            item = typing.get_args(tp)[0]
            return tuple(self.convert(item, x, f"{path}[{i}]") for i, x in enumerate(raw))
        if origin is dict:
            if not isinstance(raw, dict):
                raise self.fail(path, f"expected an object, found {describe(raw)}")
            item = typing.get_args(tp)[1]
            return {k: self.convert(item, v, f"{path}.{k}") for k, v in raw.items()}
        if dataclasses.is_dataclass(tp):
            return self.build(tp, raw, path)
        if tp is bool:
            if not isinstance(raw, bool):
                raise self.fail(path, f"expected true or false, found {describe(raw)}")
            return raw
        if tp is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise self.fail(path, f"expected an integer, found {describe(raw)}")
            return raw
        if tp is float:
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise self.fail(path, f"expected a number, found {describe(raw)}")
            return float(raw)
        if tp is str:
            if not isinstance(raw, str):
                raise self.fail(path, f"expected a string, found {describe(raw)}")
            return raw
        raise TypeError(f"schema type {tp!r} has no converter")  # a bug in schema.py, not input


def parse_spec(cls: type, obj: Any, file: str, path: str = "$") -> Any:
    """Build dataclass ``cls`` from JSON ``obj``; errors name ``file`` and the JSON path."""
    return Parser(file).build(cls, obj, path)


def to_json(value: Any) -> Any:
    """A dataclass tree back to plain JSON (keys as in pipeline.json); for inspect and tests."""
    if dataclasses.is_dataclass(value):
        out = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "extra":
                out.update(to_json(item))
            else:
                out[json_key(f)] = to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value
