"""The field helpers pipeline.json's dataclasses are written with: ``spec`` (a field with the
metadata parse.py and ranges.py read), ``Range`` (the values a number may take) and the ranges
several keys share. schema.py and preprocessing_schema.py both build on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DTYPES = ("float32", "float16", "int64", "int32", "int8", "uint8", "bool")


@dataclass(frozen=True)
class Range:
    """The values a numeric key may take, in ``unit``: low..high, ends included unless open.

    ``elements`` bounds a shape's product (the tensor it allocates). config/ranges.py enforces
    every declared range at load; a numeric field without one fails tests/py/config/test_ranges.py.
    """

    low: float
    high: float
    unit: str
    open_low: bool = False
    open_high: bool = False
    elements: int | None = None

    def holds(self, value: float) -> bool:
        if value != value:   # NaN
            return False
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return above and below

    def span(self) -> str:
        if not (self.open_low or self.open_high):
            return f"{_num(self.low)}..{_num(self.high)}"
        return (f"{'(' if self.open_low else '['}{_num(self.low)}, "
                f"{_num(self.high)}{')' if self.open_high else ']'}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def spec(default: Any = None, doc: str = "", *, choices: tuple = (), aliases: dict | None = None,
         one_or_many: bool = False, required: bool = False, factory: Any = None,
         range: Range | None = None, numbers: str = ""):
    """A dataclass field with the metadata the generic parser reads. ``range``: the values every
    number in it may take (config/ranges.py checks them at load); ``numbers``: for a free-form
    field with no declared range, what checks the numbers it may hold."""
    meta = {"doc": doc, "choices": choices, "aliases": aliases or {},
            "one_or_many": one_or_many, "required": required, "range": range, "numbers": numbers}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# ranges several keys share
MAX_TOKENS = 2 ** 24                       # context lengths: onnxruntime-genai's largest are ~10M
TOKEN_ID = Range(0, 2 ** 31 - 1, "a token id")
TOKENS = Range(0, MAX_TOKENS, "tokens")
SAMPLE_RATE = Range(1, 384_000, "samples per second")
SEED = Range(-1, 2 ** 63 - 1, "a seed; -1 picks one")
MAX_ELEMENTS = 2 ** 24                     # values of one tensor a shape declares (64 MiB of float32)
SHAPE = Range(1, MAX_ELEMENTS, "a dimension size", elements=MAX_ELEMENTS)
CONTROL_VALUE = Range(-(2 ** 53), 2 ** 53, "a value JavaScript holds exactly")
