"""One load-time check of every number in a config against the range its field declares.

Each numeric field of schema.py's dataclasses declares ``range=Range(low, high, unit)`` next to
its default; this walk refuses the first number outside it (NaN and infinities included) with
the JSON path, the range with its unit and the value found. Stage checks that relate several
keys (num_return_sequences <= num_beams, ...) stay with their stage; sizes a config value makes
(buffers, silences, windows, caches) are bounded here, before anything is allocated.

``onnxpipe.load`` calls it once the sessions are open and every stage has checked its own keys
(a stage's message says more: "window_seconds of at least 0.02"), before any call runs.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from ..errors import ConfigError
from .parse import json_key
from .schema import Range

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def holds_numbers(tp: Any) -> bool:
    """Whether a field of type ``tp`` can hold a number (a nested dataclass answers for itself)."""
    if tp is Any or tp in (int, float):
        return True
    if dataclasses.is_dataclass(tp) or tp in (str, bool, type(None)):
        return False
    return any(holds_numbers(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)


def _integer(tp: Any) -> bool:
    """Whether the numbers of a field of type ``tp`` are integers (its type says int, never float)."""
    if tp is int:
        return True
    if tp is float or tp is Any:
        return False
    args = [a for a in typing.get_args(tp) if a is not Ellipsis]
    return any(_integer(a) for a in args) and not any(a is float or a is Any for a in args)


def _shown(value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))   # as the JSON had it: 68444, not 68444.0
    return repr(value)


def check_ranges(value: Any, file: str | None, path: str = "$") -> None:
    """Raise ConfigError for the first number in dataclass tree ``value`` outside its declared range."""
    hints = _hints(type(value))
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        where = f"{path}.{json_key(f)}"
        declared = f.metadata.get("range")
        if declared is not None:
            _check(declared, _integer(hints[f.name]), item, file, where)
        _descend(item, file, where)


def _descend(item: Any, file: str, path: str) -> None:
    if dataclasses.is_dataclass(item):
        check_ranges(item, file, path)
    elif isinstance(item, (list, tuple)):
        for i, x in enumerate(item):
            if dataclasses.is_dataclass(x):
                check_ranges(x, file, f"{path}[{i}]")
    elif isinstance(item, dict):
        for k, x in item.items():
            if dataclasses.is_dataclass(x):
                check_ranges(x, file, f"{path}.{k}")


def _check(r: Range, integer: bool, item: Any, file: str, path: str) -> None:
    """Every number in ``item`` (a number, or lists and objects of them) within ``r``."""
    if isinstance(item, bool) or item is None or isinstance(item, str) or dataclasses.is_dataclass(item):
        return
    if isinstance(item, (int, float)):
        if not (isinstance(item, int) or math.isfinite(item)) or not r.holds(item):
            kind = "an integer" if integer else "a number"
            raise ConfigError(f"expected {kind} in {r.span()} ({r.unit}), found {_shown(item)}",
                              file=file, path=path)
        return
    if isinstance(item, (list, tuple)):
        for i, x in enumerate(item):
            _check(r, integer, x, file, f"{path}[{i}]")
        if r.elements is not None and item:
            count = math.prod(item)
            if count > r.elements:
                raise ConfigError(f"expected at most {r.elements} values in all (the product of the sizes), "
                                  f"found {list(item)}: {count}", file=file, path=path)
    elif isinstance(item, dict):
        for k, x in item.items():
            _check(r, integer, x, file, f"{path}.{k}")


def unranged_fields(cls: type, seen: set | None = None) -> list[str]:
    """'Class.field' for each field of ``cls`` (and the dataclasses inside it) that can hold a
    number but declares neither a range nor what checks its numbers."""
    seen = set() if seen is None else seen
    if cls in seen:
        return []
    seen.add(cls)
    missing = []
    for f in dataclasses.fields(cls):
        tp = _hints(cls)[f.name]
        if holds_numbers(tp) and f.metadata.get("range") is None and not f.metadata.get("numbers"):
            missing.append(f"{cls.__name__}.{f.name}")
        for inner in _dataclasses_in(tp):
            missing += unranged_fields(inner, seen)
    return missing


def _dataclasses_in(tp: Any) -> list[type]:
    if dataclasses.is_dataclass(tp):
        return [tp]
    if typing.get_origin(tp) in (typing.Union, types.UnionType, tuple, dict):
        return [c for arg in typing.get_args(tp) for c in _dataclasses_in(arg)]
    return []
