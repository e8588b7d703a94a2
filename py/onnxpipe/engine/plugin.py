"""The plugin escape hatch: a Python file inside the bundle for glue that can't be declared.

``pipeline.plugin = {"module": "plugin.py", "entry_point": "create"}``. The runtime imports
the file from the bundle folder (never from anywhere else) and calls
``create(context: PluginContext)``, which returns an object with any of these hooks:

- ``reads``: a list of ``"session.output"`` the plugin reads through ``context.output``
  (the executor keeps those tensors alive);
- ``before_run(call: PluginCall)``: called before a session runs, after its feeds are
  gathered and before the state (KV cache, positions, mask) binds; it may replace entries of
  ``call.feeds`` and raise ``call.context.new_length`` when it lengthens the sequence;
- ``penalty_ids(history, generated)``: the ids the repetition penalty applies to
  (default: ``history``, every id the state took in).

The plugin sees engine tensors only through the context, so it runs natively and in the
browser alike (no numpy).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, OnnxpipeError
from ..ops import tensor as tensor_ops
from ..state.base import StepContext


@dataclass
class PluginCall:
    session: str                    # the session about to run
    phase: str                      # "init" | "step" | "final"
    feeds: dict[str, Any]           # input name -> engine tensor; replace entries to change them
    inputs: dict[str, tuple]        # the phase's host inputs: name -> (flat values, shape)
    context: StepContext            # past_length / new_length of this phase


class PluginContext:
    """What a plugin may use: the spec, engine tensors and a few engine-side ops."""

    def __init__(self, spec, backend, sessions: dict, values: dict):
        self.spec = spec
        self.backend = backend
        self.sessions = sessions
        self._values = values

    def output(self, session: str, name: str):
        """The latest value of a session output listed in the plugin's ``reads`` (or None)."""
        return self._values.get((session, name))

    def has_session(self, name: str) -> bool:
        return name in self.sessions

    file: str | None = None   # the config the plugin is declared in (for errors)

    def tensor(self, values, dtype: str, shape) -> Any:
        values = list(values)
        try:
            return self.backend.tensor(values, dtype, tuple(shape))
        except (OverflowError, ValueError, TypeError) as exc:   # e.g. an id from the config out of range
            raise ConfigError(f"the plugin made a {dtype} tensor of shape {tuple(shape)} from values its "
                              f"config gave ({values[:4]}...): {exc}", file=self.file,
                              path="$.pipeline.plugin") from None

    def to_list(self, tensor) -> list:
        return self.backend.to_list(tensor)

    def shape(self, tensor) -> tuple[int, ...]:
        return tuple(self.backend.shape(tensor))

    def concat(self, tensors: list, axis: int, dtype: str, provider: str = "cpu"):
        """Join engine tensors along ``axis`` inside the engine (rank and dtype shared)."""
        rank = len(self.backend.shape(tensors[0]))
        if axis < 0:
            axis += rank
        graph = self.backend.open_graph(tensor_ops.concat_graph(dtype, rank, len(tensors), axis), provider)
        return self.backend.run(graph, {f"x{i}": t for i, t in enumerate(tensors)}, ["y"])["y"]

    def dispose(self, tensor) -> None:
        self.backend.dispose(tensor)


def load_plugin(config, backend, sessions: dict, values: dict):
    """Import the bundle's plugin file and call its entry point; None without a plugin."""
    spec = config.spec.pipeline.plugin
    if spec is None:
        return None
    path = os.path.join(config.bundle_dir, spec.module)
    where = dict(file=config.file, path="$.pipeline.plugin")
    _check_inside_bundle(path, config, spec.module)
    module_spec = importlib.util.spec_from_file_location(
        f"onnxpipe_plugin_{abs(hash(os.path.abspath(path)))}", path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f'plugin "{spec.module}" is not a Python file', **where)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except FileNotFoundError:
        raise ConfigError(f'plugin file "{spec.module}" does not exist in {config.bundle_dir}', **where) from None
    except Exception as exc:
        raise ConfigError(f'plugin "{spec.module}" failed to import: {type(exc).__name__}: {exc}', **where) from exc
    entry = getattr(module, spec.entry_point, None)
    if not callable(entry):
        found = ", ".join(n for n in vars(module) if callable(vars(module)[n]) and not n.startswith("_"))
        raise ConfigError(f'plugin "{spec.module}" has no function "{spec.entry_point}" '
                          f"(it defines: {found or 'nothing callable'})", file=config.file,
                          path="$.pipeline.plugin.entry_point")
    context = PluginContext(config.spec, backend, sessions, values)
    context.file = config.file
    try:
        plugin = entry(context)
    except OnnxpipeError:
        raise
    except Exception as exc:   # the plugin's own checks of the config it was given
        raise ConfigError(f'plugin "{spec.module}" {spec.entry_point}() failed: {type(exc).__name__}: {exc}',
                          **where) from exc
    flow = {step.run for step in config.spec.pipeline.flow}
    for session, name in plugin_reads(plugin):
        if session in sessions and name not in sessions[session].outputs:
            ref = f"{session}.{name}"
            raise ConfigError(f'plugin reads "{ref}" but session "{session}" has no output "{name}" '
                              f"(available outputs: {', '.join(sessions[session].outputs)})", **where)
        if session in sessions and session not in flow:   # its output would never exist
            raise ConfigError(f'plugin reads "{session}.{name}" but no flow step runs session "{session}"',
                              file=config.file, path="$.pipeline.flow")
    return plugin


def _check_inside_bundle(path: str, config, module: str) -> None:
    """Refuse a plugin file that resolves outside the bundle folder (a symlink pointing out, or a
    path validation let through): only the bundle's own code may run (docs/security.md)."""
    real, root = os.path.realpath(path), os.path.realpath(config.bundle_dir)
    if os.path.commonpath([real, root]) != root:
        raise ConfigError(f'plugin "{module}" resolves to {real}, outside the bundle folder {root}: '
                          "a plugin is loaded only from inside its bundle", file=config.file,
                          path="$.pipeline.plugin.module")


def plugin_reads(plugin) -> list[tuple[str, str]]:
    """(session, output) pairs of a plugin's ``reads`` (none without a plugin)."""
    return [tuple(str(ref).partition(".")[::2]) for ref in getattr(plugin, "reads", ()) or ()]
