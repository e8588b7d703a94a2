"""Caller controls declared in ``pipeline.inputs``: defaults, ranges, choices and packing.

A voice's ``scales`` input is three numbers; pipeline.json names them (noise_scale,
length_scale, noise_w) with defaults and ranges and packs them into the one tensor, so a
caller says ``noise_scale=0`` and never builds the tensor itself. A choice control
(``options``) takes a name from a declared list and gives the flow the value mapped to it, so a
caller says ``voice="jm_kumo"`` and the flow gets that voice's index.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.registry import register_check
from ..errors import ConfigError, InputError, nearest

FLOAT_TYPES = ("float32", "float16")


@dataclass(frozen=True)
class Control:
    """A number a caller may set (what a UI shows as a slider), or with ``options`` a choice
    among names (a select; ``default`` is then one of them)."""

    name: str
    default: float | str
    min: float | None
    max: float | None
    doc: str
    options: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "default": self.default, "min": self.min, "max": self.max, "doc": self.doc,
                "options": list(self.options)}


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _check_choice(name: str, spec, file: str, path: str) -> None:
    """A choice control: every option a value of the input's shape, the default one of them."""
    for key in ("min", "max"):
        if getattr(spec, key) is not None:
            raise ConfigError(f"{key}: a choice control (options) takes no range", file=file, path=f"{path}.{key}")
    if spec.pack:
        raise ConfigError("pack: a choice control (options) cannot also be a pack", file=file, path=f"{path}.pack")
    for option, value in spec.options.items():
        values = value if isinstance(value, list) else [value]
        if not option or len(values) != _count(spec.shape) or not all(_is_number(v) for v in values):
            raise ConfigError(f'option "{option}": expected {_count(spec.shape)} number(s) for shape '
                              f"{list(spec.shape)}, found {value!r}", file=file, path=f"{path}.options.{option}")
    if not isinstance(spec.default, str) or spec.default not in spec.options:   # a UI shows it selected
        raise ConfigError(f"default: expected one of {', '.join(spec.options)}, found {spec.default!r}",
                          file=file, path=f"{path}.default")


def check_declarations(inputs: dict, file: str) -> None:
    """Load-time checks: packs name declared scalars, defaults fit their shape and range, a
    choice control's options fit its shape and its default is one of them."""
    for name, spec in inputs.items():
        path = f"$.pipeline.inputs.{name}"
        if spec.options:
            _check_choice(name, spec, file, path)
            continue
        for i, part in enumerate(spec.pack):
            if part not in inputs:
                hint = nearest(part, inputs)
                tip = f' Did you mean "{hint}"?' if hint else ""
                raise ConfigError(f'pack names "{part}", which is not declared in pipeline.inputs.{tip}',
                                  file=file, path=f"{path}.pack[{i}]")
            if inputs[part].shape or inputs[part].pack or inputs[part].options:
                raise ConfigError(f'pack part "{part}" must be a scalar number control (shape [], no pack, '
                                  "no options)", file=file, path=f"{path}.pack[{i}]")
        if spec.pack:
            continue
        if spec.default is None:
            continue
        values = spec.default if isinstance(spec.default, list) else [spec.default]
        if len(values) != _count(spec.shape) or not all(_is_number(v) for v in values):
            raise ConfigError(f"default: expected {_count(spec.shape)} number(s) for shape "
                              f"{list(spec.shape)}, found {spec.default!r}", file=file, path=f"{path}.default")
        _check_range(name, spec, values, lambda msg: ConfigError(msg, file=file, path=f"{path}.default"))


def check_config(spec, file: str, bundle_dir: str | None = None) -> None:
    """The load-time check of pipeline.inputs (``check_declarations``)."""
    check_declarations(spec.pipeline.inputs, file)


register_check("controls", check_config, order=10)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_range(name, spec, values, error) -> None:
    for v in values:
        if spec.min is not None and v < spec.min or spec.max is not None and v > spec.max:
            low = "-inf" if spec.min is None else spec.min
            high = "inf" if spec.max is None else spec.max
            raise error(f'"{name}" = {v} is outside its range [{low}, {high}]')


def controls(inputs: dict) -> list[Control]:
    """What a caller may set, in declaration order: scalar numbers and choices."""
    out = []
    for name, s in inputs.items():
        if s.options:
            out.append(Control(name, s.default, None, None, s.doc, tuple(s.options)))
        elif not s.pack and not s.shape and not s.options and _is_number(s.default):
            out.append(Control(name, float(s.default), s.min, s.max, s.doc))
    return out


def _choice(name: str, spec, value) -> list:
    """The flat values an option name stands for."""
    if not isinstance(value, str) or value not in spec.options:
        raise InputError(f"{name}: expected one of {', '.join(spec.options)}, found {value!r:.60}")
    mapped = spec.options[value]
    return list(mapped) if isinstance(mapped, list) else [mapped]


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
        if spec.options:
            _choice(name, spec, value)
            continue
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
        elif spec.options:
            out[name] = (_typed(_choice(name, spec, given.get(name, spec.default)), spec.dtype), tuple(spec.shape))
        elif name in given or spec.default is not None:
            value = given.get(name, spec.default)
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            out[name] = (_typed(values, spec.dtype), tuple(spec.shape))
    return out


def _scalar(name: str, inputs: dict, given: dict) -> float:
    value = given[name] if name in given else inputs[name].default
    if value is None:
        raise InputError(f'control "{name}" has no default: give it (e.g. {name}=1.0)')
    return value[0] if isinstance(value, (list, tuple)) else value   # checked: one number, or a list of one


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
