"""Caller controls declared in ``pipeline.inputs``: defaults, ranges and packing into tensors.

A voice's ``scales`` input is three numbers; pipeline.json names them (noise_scale,
length_scale, noise_w) with defaults and ranges and packs them into the one tensor, so a
caller says ``noise_scale=0`` and never builds the tensor itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError, InputError, nearest

FLOAT_TYPES = ("float32", "float16")


@dataclass(frozen=True)
class Control:
    """A number a caller may set (what a UI shows as a slider)."""

    name: str
    default: float
    min: float | None
    max: float | None
    doc: str

    def to_dict(self) -> dict:
        return {"name": self.name, "default": self.default, "min": self.min, "max": self.max, "doc": self.doc}


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def check_declarations(inputs: dict, file: str) -> None:
    """Load-time checks: packs name declared scalars, defaults fit their shape and range."""
    for name, spec in inputs.items():
        path = f"$.pipeline.inputs.{name}"
        for i, part in enumerate(spec.pack):
            if part not in inputs:
                hint = nearest(part, inputs)
                tip = f' Did you mean "{hint}"?' if hint else ""
                raise ConfigError(f'pack names "{part}", which is not declared in pipeline.inputs.{tip}',
                                  file=file, path=f"{path}.pack[{i}]")
            if inputs[part].shape or inputs[part].pack:
                raise ConfigError(f'pack part "{part}" must be a scalar control (shape [] and no pack)',
                                  file=file, path=f"{path}.pack[{i}]")
        if spec.pack:
            continue
        if spec.default is None:
            continue
        values = spec.default if isinstance(spec.default, list) else [spec.default]
        if len(values) != _count(spec.shape) or not all(_is_number(v) for v in values):
            raise ConfigError(f"default: expected {_count(spec.shape)} number(s) for shape "
                              f"{list(spec.shape)}, found {spec.default!r}", file=file, path=f"{path}.default")
        _check_range(name, spec, values, lambda msg: ConfigError(msg, file=file, path=f"{path}.default"))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_range(name, spec, values, error) -> None:
    for v in values:
        if spec.min is not None and v < spec.min or spec.max is not None and v > spec.max:
            low = "-inf" if spec.min is None else spec.min
            high = "inf" if spec.max is None else spec.max
            raise error(f'"{name}" = {v} is outside its range [{low}, {high}]')


def controls(inputs: dict) -> list[Control]:
    """The scalar numbers a caller may set, in declaration order."""
    return [Control(name, float(s.default), s.min, s.max, s.doc) for name, s in inputs.items()
            if not s.pack and not s.shape and _is_number(s.default)]


def resolve(inputs: dict, given: dict) -> dict[str, tuple[list, tuple[int, ...]]]:
    """Pipeline input tensors (flat values, shape) from defaults and the caller's ``given``.

    Unknown names, wrong types and out-of-range values are InputErrors naming the control.
    """
    for name, value in given.items():
        if name not in inputs:
            hint = nearest(name, inputs)
            tip = f' Did you mean "{hint}"?' if hint else ""
            raise InputError(f'unknown control "{name}".{tip} This pipeline takes: '
                             f"{', '.join(inputs) or 'none'}")
        spec = inputs[name]
        values = value if isinstance(value, (list, tuple)) else [value]
        want = len(spec.pack) if spec.pack else _count(spec.shape)
        if len(values) != want or not all(_is_number(v) for v in values):
            raise InputError(f'control "{name}": expected {want} number(s), found {value!r:.60}')
        _check_range(name, spec, values, InputError)
    out: dict[str, tuple[list, tuple[int, ...]]] = {}
    for name, spec in inputs.items():
        if spec.pack:
            if name in given:
                values = list(given[name])
            else:
                values = [_scalar(part, inputs, given) for part in spec.pack]
            out[name] = (_typed(values, spec.dtype), (len(values),))
        elif name in given or spec.default is not None:
            value = given.get(name, spec.default)
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            out[name] = (_typed(values, spec.dtype), tuple(spec.shape))
    return out


def _scalar(name: str, inputs: dict, given: dict) -> float:
    if name in given:
        return given[name]
    default = inputs[name].default
    if default is None:
        raise InputError(f'control "{name}" has no default: give it (e.g. {name}=1.0)')
    return default


def _typed(values: list, dtype: str) -> list:
    return [float(v) for v in values] if dtype in FLOAT_TYPES else [int(v) for v in values]


def tensors_from_json(doc, where: str) -> dict[str, tuple[list, tuple[int, ...]]]:
    """Caller tensors written as JSON, ``{name: {"values": [...], "shape": [...]}}`` (a voice
    file, a worker request), as pipeline inputs (flat values, shape)."""
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected an object name -> {{values, shape}}, found {type(doc).__name__}")
    out = {}
    for name, tensor in doc.items():
        if not (isinstance(tensor, dict) and "values" in tensor and "shape" in tensor):
            raise InputError(f'{where}: "{name}" needs "values" and "shape"')
        out[name] = (tensor["values"], tuple(tensor["shape"]))
    return out
