"""onnxruntime (CPython) backend. The only runtime module that imports numpy."""

from __future__ import annotations

from array import array

import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import onnxruntime as ort

from ..errors import ConfigError, EngineError, nearest
from .base import TensorInfo

# pipeline.json provider names -> onnxruntime's
PROVIDER_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
}
_ORT_TYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
    "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8",
    "tensor(uint8)": "uint8", "tensor(bool)": "bool",
}
_NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int64": np.int64,
       "int32": np.int32, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "uint32": np.uint32}


@dataclass(eq=False)
class NativeSession:
    name: str
    provider: str
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    ort_session: ort.InferenceSession
    binding: Any = field(default=None, repr=False)
    bound_now: dict = field(default_factory=dict, repr=False)   # name -> value bound last run
    path: str = ""                                                # the model file ("" for graphs)


def _infos(args) -> dict[str, TensorInfo]:
    return {a.name: TensorInfo(a.name, _ORT_TYPES.get(a.type, a.type),
                               tuple(d if isinstance(d, int) else (d or None) for d in a.shape))
            for a in args}


# options whose values are onnxruntime enums, given by name in pipeline.json ("ORT_ENABLE_ALL")
_ENUM_OPTIONS = {"graph_optimization_level": ort.GraphOptimizationLevel, "execution_mode": ort.ExecutionMode}


class NativeBackend:
    """Runs sessions with onnxruntime; tensors are OrtValues."""

    name = "native"
    supports_bound_outputs = True

    def __init__(self, threads: int | None = None, spinning: bool = False):
        """``threads``: intra-op threads per session (None: onnxruntime's default, one per core);
        ``spinning``: whether idle pool threads spin between ops (onnxruntime's default is on).
        Off by default: measured on 2 cores (bench/decode_speed.py --busy), SmolLM2 int4 decodes
        at 1.21x onnxruntime-genai with spinning and 1.05x without on a quiet machine, but at
        0.49x with spinning and 0.93x without while another process keeps one core busy: a
        spinning pool thread fights that process for the core. A bundle's own session_options
        win over both."""
        available = set(ort.get_available_providers())
        self.providers = tuple(k for k, v in PROVIDER_NAMES.items() if v in available)
        self.threads = threads
        self.spinning = spinning
        self._graphs: dict[tuple[str, str], NativeSession] = {}

    # ---- sessions ----------------------------------------------------------------------

    def session_options(self, options: dict[str, Any], where: str = "session_options"):
        so = ort.SessionOptions()
        if self.threads:
            so.intra_op_num_threads = self.threads
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spinning else "0")
        for key, value in options.items():
            if "." in key:  # onnxruntime config entries, e.g. "session.intra_op.allow_spinning"
                so.add_session_config_entry(key, str(value))
                continue
            if not hasattr(so, key) or key.startswith("_"):
                valid = sorted(k for k in dir(so) if not k.startswith("_") and not callable(getattr(so, k)))
                hint = nearest(key, valid)
                tip = f' Did you mean "{hint}"?' if hint else ""
                raise ConfigError(f'unknown session option "{key}".{tip} Valid: {", ".join(valid)}, or an '
                                  'onnxruntime config entry such as "session.intra_op.allow_spinning"',
                                  path=f"{where}.{key}")
            enum = _ENUM_OPTIONS.get(key)
            if enum is not None and isinstance(value, str):
                names = [n for n in dir(enum) if n.startswith("ORT_")]
                if value not in names:
                    raise ConfigError(f"expected one of {', '.join(names)}, found {value!r}", path=f"{where}.{key}")
                value = getattr(enum, value)
            try:
                setattr(so, key, value)
            except TypeError:
                raise ConfigError(f"expected a value of the type of onnxruntime's SessionOptions.{key} "
                                  f"({type(getattr(so, key)).__name__}), found {value!r}",
                                  path=f"{where}.{key}") from None
        return so

    def open_session(self, name: str, path: str, providers: Sequence[str],
                     options: dict[str, Any], external_data: Sequence[str] = ()) -> NativeSession:
        ort_providers = [PROVIDER_NAMES[p] for p in providers if p in self.providers]
        if not ort_providers:
            ort_providers = ["CPUExecutionProvider"]
        try:
            sess = ort.InferenceSession(path, self.session_options(options, f"sessions.{name}.session_options"),
                                        providers=ort_providers)
        except ConfigError:
            raise
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph classes
            raise EngineError(f'session "{name}": onnxruntime could not open {path}: {exc}') from None
        got = sess.get_providers()[0]
        provider = next((k for k, v in PROVIDER_NAMES.items() if v == got), got)
        return NativeSession(name, provider, _infos(sess.get_inputs()), _infos(sess.get_outputs()), sess,
                             path=path)

    def model_reader(self, path: str):
        from ..onnx_info import FileSource
        return FileSource(path)

    def open_graph(self, model: bytes, provider: str = "cpu") -> NativeSession:
        key = (hashlib.sha1(model).hexdigest(), provider)
        if key not in self._graphs:
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1  # tiny graphs: threads cost more than they save
            sess = ort.InferenceSession(model, so, providers=[PROVIDER_NAMES.get(provider, "CPUExecutionProvider")])
            self._graphs[key] = NativeSession("graph", provider, _infos(sess.get_inputs()),
                                              _infos(sess.get_outputs()), sess)
        return self._graphs[key]

    # ---- tensors -----------------------------------------------------------------------

    def tensor(self, values, dtype: str, shape: Sequence[int]):
        return ort.OrtValue.ortvalue_from_numpy(np.asarray(values, dtype=_NP[dtype]).reshape(shape))

    def full(self, dtype: str, shape: Sequence[int], value):
        return ort.OrtValue.ortvalue_from_numpy(np.full(tuple(shape), value, dtype=_NP[dtype]))

    def to_list(self, tensor) -> list:
        return tensor.numpy().reshape(-1).tolist()

    def to_float32(self, tensor) -> array:
        return array("f", tensor.numpy().astype("float32", copy=False).reshape(-1).tobytes())

    def shape(self, tensor) -> tuple[int, ...]:
        return tuple(tensor.shape())

    def dispose(self, tensor) -> None:
        pass  # OrtValues are freed when the last reference goes

    def dispose_many(self, tensors: list) -> None:
        pass

    # ---- running -----------------------------------------------------------------------

    def run(self, session: NativeSession, feeds: dict, outputs: Sequence[str], bound: dict | None = None):
        try:
            if not bound:
                values = session.ort_session.run_with_ort_values(list(outputs), feeds)
                return dict(zip(outputs, values))
            return self._run_bound(session, feeds, outputs, bound)
        except Exception as exc:
            raise EngineError(f'session "{session.name}" failed to run: {exc}') from None

    def _run_bound(self, session: NativeSession, feeds: dict, outputs: Sequence[str], bound: dict):
        """IOBinding run: outputs in ``bound`` are written in place (shared KV buffers).

        Bindings persist between runs, so only values that changed are rebound, and only the
        outputs the engine allocated are wrapped for the caller.
        """
        binding = session.binding
        if binding is None or list(session.bound_now.get("__outputs__", ())) != list(outputs):
            binding = session.binding = session.ort_session.io_binding()
            session.bound_now = {"__outputs__": list(outputs)}
        now = session.bound_now
        for name, value in feeds.items():
            if now.get(name) is not value:
                binding.bind_ortvalue_input(name, value)
                now[name] = value
        fresh = []
        for index, name in enumerate(outputs):
            value = bound.get(name)
            if value is None:
                binding.bind_output(name, "cpu")
                fresh.append((index, name))
            elif now.get("->" + name) is not value:
                binding.bind_ortvalue_output(name, value)
                now["->" + name] = value
        session.ort_session.run_with_iobinding(binding)
        raw = binding._iobinding.get_outputs()  # the public get_outputs() wraps every output
        result = {name: ort.OrtValue(raw[index]) for index, name in fresh}
        result.update((name, bound[name]) for name in outputs if name in bound)
        return result
