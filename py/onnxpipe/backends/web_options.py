"""A session's ``session_options`` (onnxruntime's Python names) as onnxruntime-web options.

onnxruntime-web takes camelCase names and silently ignores any other key, so each supported
name is translated here and every other one is refused with the JSON path: a bundle never
loads in the browser with an option that would quietly do nothing there. Engine config
entries ("session.intra_op.allow_spinning") go through ``extra``, which onnxruntime-web hands
to the engine as config entries. Pure Python: imported by the web backend and tested natively.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

_GRAPH_LEVELS = {"ORT_DISABLE_ALL": "disabled", "ORT_ENABLE_BASIC": "basic",
                 "ORT_ENABLE_EXTENDED": "extended", "ORT_ENABLE_LAYOUT": "layout", "ORT_ENABLE_ALL": "all"}
_MODES = {"ORT_SEQUENTIAL": "sequential", "ORT_PARALLEL": "parallel"}

# Python name -> (onnxruntime-web name, value check/translation)
_NAMES = {
    "graph_optimization_level": ("graphOptimizationLevel", _GRAPH_LEVELS),
    "execution_mode": ("executionMode", _MODES),
    "enable_cpu_mem_arena": ("enableCpuMemArena", bool),
    "enable_mem_pattern": ("enableMemPattern", bool),
    "enable_profiling": ("enableProfiling", bool),
    "log_severity_level": ("logSeverityLevel", int),
    "log_verbosity_level": ("logVerbosityLevel", int),
    "logid": ("logId", str),
    "profile_file_prefix": ("profileFilePrefix", str),
}
# known to onnxruntime, with no effect in onnxruntime-web: say why instead of ignoring them
_NO_EFFECT = {
    "intra_op_num_threads": "onnxruntime-web runs every session of a page on one thread pool set when "
                            "the engine starts (the worker's threads option)",
    "inter_op_num_threads": "onnxruntime-web runs every session of a page on one thread pool set when "
                            "the engine starts (the worker's threads option)",
    "optimized_model_filepath": "a browser worker has no file system to write the optimised model to",
}


def web_session_options(options: dict[str, Any], where: str, file: str | None = None) -> dict[str, Any]:
    """onnxruntime-web's options for ``options`` (a session's session_options); ConfigError
    naming ``where.KEY`` for a key or value it cannot honour."""
    out: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for key, value in options.items():
        path = f"{where}.{key}"
        if "." in key:   # an engine config entry
            extra[key] = str(value)
            continue
        if key in _NO_EFFECT:
            raise ConfigError(f'"{key}" is not supported in the browser: {_NO_EFFECT[key]}', file=file, path=path)
        if key not in _NAMES:
            raise ConfigError(f'"{key}" is not a session option onnxruntime-web supports. Supported: '
                              f'{", ".join(sorted(_NAMES))}, or an engine config entry such as '
                              '"session.intra_op.allow_spinning"', file=file, path=path)
        name, rule = _NAMES[key]
        if isinstance(rule, dict):
            if value not in rule:
                raise ConfigError(f"expected one of {', '.join(rule)}, found {value!r}", file=file, path=path)
            value = rule[value]
        elif not isinstance(value, rule) or (rule is int and isinstance(value, bool)):
            raise ConfigError(f"expected {rule.__name__}, found {value!r}", file=file, path=path)
        out[name] = value
    if extra:
        out["extra"] = extra
    return out
