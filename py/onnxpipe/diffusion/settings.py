"""Scheduler settings as diffusers' ``scheduler_config.json`` spells them, checked at load.

Each scheduler declares its keys in a table: default, what type the value must have, and the
values this runtime supports where it supports only some (the others are refused, with the JSON
path, instead of being ignored). ``_class_name`` must name the scheduler's diffusers class;
``_diffusers_version`` and ``_use_default_values`` are diffusers' own bookkeeping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

METADATA = ("_class_name", "_diffusers_version", "_use_default_values")


@dataclass(frozen=True)
class Key:
    default: Any
    kind: str                       # "int", "number", "bool", "string", "numbers" (a list)
    supported: tuple = ()           # the only values that work here (empty: any of its kind)
    nullable: bool = False
    least: float | None = None      # smallest value allowed
    most: float | None = None       # largest value allowed (a size a schedule allocates is bounded)


def _kind_ok(value: Any, kind: str) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value)
    return {"int": isinstance(value, int) and not isinstance(value, bool),
            "number": number,
            "bool": isinstance(value, bool),
            "string": isinstance(value, str),
            "numbers": isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        and _finite(v) for v in value)}[kind]


def _finite(value: float) -> bool:
    return not isinstance(value, float) or math.isfinite(value)   # an int is finite, however large


_KIND_TEXT = {"int": "an integer", "number": "a finite number", "bool": "true or false", "string": "a string",
              "numbers": "a list of finite numbers"}


def resolve(table: dict[str, Key], given: dict, scheduler: str, diffusers_class: str,
            file: str, path: str) -> dict:
    """``given`` checked against ``table``; every key of the table present, defaults filled in."""
    if not isinstance(given, dict):
        raise ConfigError(f"expected an object of scheduler settings, found {type(given).__name__}",
                          file=file, path=path)
    out = {name: key.default for name, key in table.items()}
    for name, value in given.items():
        where = f"{path}.{name}"
        if name in METADATA:
            if name == "_class_name" and value != diffusers_class:
                raise ConfigError(f'settings for "{value}", but the scheduler is "{scheduler}" '
                                  f"({diffusers_class})", file=file, path=where)
            continue
        key = table.get(name)
        if key is None:
            raise ConfigError(f'unknown setting "{name}" for scheduler "{scheduler}"; it takes '
                              f"{', '.join(sorted(table))}", file=file, path=where)
        if value is None and key.nullable:
            out[name] = None
            continue
        if not _kind_ok(value, key.kind):
            raise ConfigError(f"expected {_KIND_TEXT[key.kind]}{' or null' if key.nullable else ''}, "
                              f"found {value!r}", file=file, path=where)
        if key.supported and value not in key.supported:
            raise ConfigError(f'{name} {value!r} is not supported by this runtime\'s "{scheduler}"; '
                              f"supported: {', '.join(repr(v) for v in key.supported)}", file=file, path=where)
        if key.least is not None and value < key.least:
            raise ConfigError(f"expected {name} >= {key.least}, found {value}", file=file, path=where)
        if key.most is not None and value > key.most:
            raise ConfigError(f"expected {name} <= {key.most}, found {value}", file=file, path=where)
        out[name] = value
    if out.get("trained_betas") is not None and len(out["trained_betas"]) != out["num_train_timesteps"]:
        raise ConfigError(f"trained_betas has {len(out['trained_betas'])} values; num_train_timesteps is "
                          f"{out['num_train_timesteps']}", file=file, path=f"{path}.trained_betas")
    return out


# keys both schedulers take, with diffusers' defaults
COMMON: dict[str, Key] = {
    "num_train_timesteps": Key(1000, "int", least=2, most=100_000),   # the schedule is a list this long
    "beta_start": Key(0.0001, "number", least=0, most=1),
    "beta_end": Key(0.02, "number", least=0, most=1),
    "beta_schedule": Key("linear", "string", ("linear", "scaled_linear", "squaredcos_cap_v2")),
    "trained_betas": Key(None, "numbers", nullable=True),
    "prediction_type": Key("epsilon", "string", ("epsilon", "v_prediction", "sample")),
    "steps_offset": Key(0, "int", least=0, most=100_000),
    "rescale_betas_zero_snr": Key(False, "bool", (False,)),
}
