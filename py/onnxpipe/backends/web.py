"""onnxruntime-web backend, for Python in Pyodide inside the runtime Web Worker.

Tensors are ort.Tensor objects that stay in JavaScript; Python holds JsProxy handles and
passes them back by handle (the KV cache is never copied). Engine calls return promises;
``run_sync`` blocks on them through JSPI, so the executor stays the same synchronous code
as natively. Only ids and a handful of scalars are built or read here.
"""

from __future__ import annotations

from array import array

import hashlib
import json
import os
import posixpath
from dataclasses import dataclass
from typing import Any, Sequence

import js  # type: ignore[import-not-found]  (Pyodide only)
import onnxpipe_js  # type: ignore[import-not-found]  (workers/bridge.ts)
import ort  # type: ignore[import-not-found]  (onnxruntime-web, registered by the worker)
from pyodide.ffi import JsException, run_sync, to_js  # type: ignore[import-not-found]

from ..errors import EngineError
from ..heap.plan import plan_file, plan_parts
from ..onnx_info import BlockSource
from . import half
from .web_options import web_session_options
from .base import TensorInfo

_OBJECT = {"dict_converter": js.Object.fromEntries}


def _js(value):
    return to_js(value, **_OBJECT)


@dataclass(eq=False)
class WebSession:
    name: str
    provider: str
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    js_session: Any
    path: str = ""   # the model file ("" for runtime graphs)


class JsFileSource:
    """Range reads of a bundle file the worker holds (bytes or a storage-backed Blob): only the
    ranges asked for cross into Python, never the whole model (onnx_info reads its graph)."""

    def __init__(self, rel: str):
        self.rel = rel
        self.size = int(onnxpipe_js.fileSize(rel))

    def read(self, offset: int, n: int) -> bytes:
        got = onnxpipe_js.readRange(self.rel, offset, n)
        if hasattr(got, "then"):   # a Blob is read asynchronously
            got = run_sync(got)
        return got.to_bytes()

    def close(self) -> None:
        pass


def _infos(metadata, names) -> dict[str, TensorInfo]:
    infos = {}
    for i, name in enumerate(names):
        meta = metadata[i] if metadata is not None else None
        if meta is not None and getattr(meta, "isTensor", True):
            # an unnamed free dim comes as -1 read unsigned (4294967295): unknown, like a name
            dims = tuple((d if 0 <= d < 2**31 else None) if isinstance(d, int) else (d or None)
                         for d in meta.shape)
            infos[name] = TensorInfo(name, str(meta.type), dims)
        else:
            infos[name] = TensorInfo(name, "float32", ())
    return infos


class WebBackend:
    """Runs sessions with onnxruntime-web (``wasm`` or ``webgpu``)."""

    name = "web"
    supports_bound_outputs = False   # shared KV buffers are fed as separate (growing) caches

    def __init__(self, bundle_dir: str, providers: Sequence[str] = ("wasm",), expand_weights: str = "auto",
                 heap_budget: int | None = None):
        self.bundle_dir = bundle_dir
        self.providers = tuple(providers)
        self.expand_weights = expand_weights   # heap/plan.py: "auto", "all" or "none"
        self.heap_budget = heap_budget         # heap bytes the weights of all wasm sessions may take
        self.heap: dict[str, dict] = {}        # wasm session -> its heap plan's summary
        self.heap_parts: dict[str, int] = {}   # session -> the heaps to spread it over (heap/shards.py)
        self._graphs: dict[tuple[str, str], WebSession] = {}
        self._name_arrays: dict[tuple[str, ...], Any] = {}

    def _create(self, name: str, data, options: dict) -> Any:
        try:
            return run_sync(ort.InferenceSession.create(data, _js(options)))
        except JsException as exc:
            raise EngineError(f'session "{name}": onnxruntime-web could not open it: {exc}') from None

    def open_session(self, name: str, path: str, providers: Sequence[str], options: dict[str, Any],
                     external_data: Sequence[str] = ()) -> WebSession:
        provider = providers[0] if providers else "wasm"
        rel = os.path.relpath(path, self.bundle_dir).replace(os.sep, "/")
        opts: dict[str, Any] = {"executionProviders": [provider]}
        opts.update(web_session_options(options, f"sessions.{name}.session_options"))
        if provider == "webgpu":
            opts.setdefault("preferredOutputLocation", "gpu-buffer")   # KV stays on the GPU
        if provider == "wasm":   # through a heap plan, which finds the data files the graph names
            sess, inputs, outputs = self._open_planned(name, rel, opts)
            return WebSession(name, provider, inputs, outputs, sess, path)
        data_dir = os.path.dirname(rel)
        if not external_data:   # the usual name when the config doesn't list them (v1 bundles)
            external_data = [rel + suffix for suffix in (".data", "_data") if onnxpipe_js.hasFile(rel + suffix)]
        else:   # declared paths are bundle-relative; the model names them relative to itself
            external_data = [f.replace(os.sep, "/") for f in external_data]
        if external_data:
            opts["externalData"] = [
                {"path": posixpath.relpath(f, data_dir or "."), "data": onnxpipe_js.getFile(f)}
                for f in external_data]
        sess = self._create(name, onnxpipe_js.getFile(rel), opts)
        inputs = _infos(getattr(sess, "inputMetadata", None), list(sess.inputNames))
        outputs = _infos(getattr(sess, "outputMetadata", None), list(sess.outputNames))
        return WebSession(name, provider, inputs, outputs, sess, path)

    def _open_planned(self, name: str, rel: str, opts: dict):
        """Open ``rel`` from its heap plan (heap/plan.py): the edited graph, its weights mounted
        as slices of the bundle's files, the expanded ones made by the worker
        (workers/heap-weights.ts); spread over ``heap_parts[name]`` onnxruntime-web instances
        (heap/shards.py, workers/ort-instances.ts) when one heap can't hold it expanded.
        Returns (session, inputs, outputs)."""
        js_file = JsFileSource(rel)
        source = BlockSource(js_file.read, js_file.size)
        parts = self.heap_parts.get(name, 1)
        used = sum(h["weight_bytes"] for h in self.heap.values())
        budget = None if self.heap_budget is None else max(0, self.heap_budget - used)
        if parts > 1:
            plans = plan_parts(source, rel, parts, self.expand_weights, [budget] * parts)
            if isinstance(plans, str):
                raise EngineError(f'session "{name}": it needs {parts} WASM heaps, but its graph can\'t be '
                                  f"split: {plans}; load it with heaps 1")
        else:
            plans = [plan_file(source, rel, self.expand_weights, budget)]
        # no packed copy of each MatMul weight beside it (+35% of the heap at Qwen2.5-0.5B): one-row
        # (decode) GEMMs on one thread run as fast or faster without (docs/large-models.md); a
        # bundle's session_options may still ask for it
        opts.setdefault("extra", {}).setdefault("session.disable_prepacking", "1")
        sessions = [self._create_in_heap(name, k, plan, dict(opts)) for k, plan in enumerate(plans)]
        # the caller sees the whole graph's I/O: not the values one part hands the next
        handed = {v for plan in plans if plan.part is not None for v in plan.part.dtypes}
        internal = {v for plan in plans if plan.part is not None for v in plan.part.internal}
        inputs, outputs = {}, {}
        for sess in sessions:
            inputs.update((k, v) for k, v in _infos(sess.inputMetadata, list(sess.inputNames)).items() if k not in handed)
            outputs.update((k, v) for k, v in _infos(sess.outputMetadata, list(sess.outputNames)).items() if k not in internal)
        summary = {key: sum(p.summary()[key] for p in plans)
                   for key in ("weight_bytes", "temp_bytes", "expanded", "kept", "widened")}
        summary["temp_bytes"] = max(p.temp_bytes for p in plans)
        summary["kept_why"] = sorted({why for p in plans for why in p.summary()["kept_why"]})
        summary["heaps"] = len(plans)
        self.heap[name] = summary
        if len(sessions) == 1:
            return sessions[0], inputs, outputs
        specs = [{"inputs": list(p.part.inputs), "outputs": list(p.part.outputs)} for p in plans]
        return run_sync(onnxpipe_js.partsSession(to_js(sessions), _js(specs))), inputs, outputs

    def _create_in_heap(self, name: str, heap: int, plan, opts: dict):
        wire = {"mounts": {k: {"file": v.file, "start": v.start, "end": v.end} for k, v in plan.mounts.items()},
                "materialize": plan.materialize}
        where = f'session "{name}"' + (f" (part {heap + 1})" if plan.part is not None else "")
        try:
            opts["externalData"] = run_sync(onnxpipe_js.heapExternalData(json.dumps(wire)))
        except JsException as exc:
            raise EngineError(f"{where}: could not make its weights for the heap: {exc}") from None
        model = js.Uint8Array.new(len(plan.model))
        model.assign(plan.model)
        try:
            return run_sync(onnxpipe_js.createSession(heap, model, _js(opts)))
        except JsException as exc:
            raise EngineError(f"{where}: onnxruntime-web could not open it: {exc}") from None

    def model_reader(self, path: str):
        rel = os.path.relpath(path, self.bundle_dir).replace(os.sep, "/")
        if onnxpipe_js.hasFile(rel):
            return JsFileSource(rel)
        from ..onnx_info import FileSource   # a file written to Pyodide's own file system
        return FileSource(path)

    def open_graph(self, model: bytes, provider: str = "wasm") -> WebSession:
        key = (hashlib.sha1(model).hexdigest(), provider)
        if key not in self._graphs:
            buffer = js.Uint8Array.new(len(model))
            buffer.assign(model)
            sess = self._create("graph", buffer, {"executionProviders": [provider]})
            self._graphs[key] = WebSession("graph", provider, _infos(None, list(sess.inputNames)),
                                           _infos(None, list(sess.outputNames)), sess)
        return self._graphs[key]

    # ---- tensors -----------------------------------------------------------------------

    # float16 crosses as half bits (uint16): JavaScript can't round to half without Float16Array.

    def tensor(self, values, dtype: str, shape: Sequence[int]):
        if dtype == "float32" and isinstance(values, array) and values.typecode == "f":
            # audio chunks: the bytes cross as one block instead of a list of numbers
            return onnxpipe_js.float32Tensor(to_js(values.tobytes()), _js(list(shape)))
        values = half.to_bits(values) if dtype == "float16" else list(values)
        return onnxpipe_js.tensor(dtype, _js(values), _js(list(shape)))

    def full(self, dtype: str, shape: Sequence[int], value):
        if dtype == "float16":
            value = half.to_bits([value])[0]
        return onnxpipe_js.full(dtype, _js(list(shape)), value)

    def _half_bytes(self, tensor) -> bytes:
        data = onnxpipe_js.halfBytes(tensor) if tensor.location == "cpu" else run_sync(
            onnxpipe_js.downloadHalfBytes(tensor))
        return data.to_bytes()

    def to_list(self, tensor) -> list:
        if tensor.type == "float16":
            return half.from_bytes(self._half_bytes(tensor))
        return onnxpipe_js.toArray(tensor).to_py() if tensor.location == "cpu" else list(
            run_sync(onnxpipe_js.download(tensor)).to_py())

    def to_float32(self, tensor) -> array:
        if tensor.type == "float16":
            return half.to_float32(self._half_bytes(tensor))
        if tensor.location != "cpu":
            return array("f", self.to_list(tensor))
        out = array("f")
        out.frombytes(onnxpipe_js.float32Bytes(tensor).to_bytes())   # one memcpy, no per-value work
        return out

    def shape(self, tensor) -> tuple[int, ...]:
        return tuple(int(d) for d in tensor.dims)

    def dispose(self, tensor) -> None:
        if tensor is not None:
            tensor.dispose()   # frees GPU buffers / wasm memory now; the proxy goes with Python's GC

    def dispose_many(self, tensors: list) -> None:
        onnxpipe_js.disposeAll(to_js([t for t in tensors if t is not None]))

    def slice_seq_many(self, tensors: list, length: int) -> list | None:
        """KV caches [B, H, T, D] cut to ``length`` positions, copied in JavaScript (wasm: the
        tensors live there; a session run would copy each into the WASM heap and the cut back
        out); None where one is on the GPU (the caller then runs its slice graph there)."""
        if any(t.location != "cpu" or t.type not in ("float32", "float16") for t in tensors):
            return None
        return list(onnxpipe_js.sliceSeq(to_js(tensors), length).to_py(depth=1))

    # ---- running -----------------------------------------------------------------------

    def run(self, session: WebSession, feeds: dict, outputs: Sequence[str], bound: dict | None = None):
        names = self._names(tuple(feeds))
        try:
            values = run_sync(onnxpipe_js.run(session.js_session, names, to_js(list(feeds.values())),
                                              self._names(tuple(outputs))))
        except JsException as exc:
            raise EngineError(f'session "{session.name}" failed to run: {exc}') from None
        return dict(zip(outputs, values.to_py(depth=1)))

    def _names(self, names: tuple[str, ...]):
        """A JS array of ``names``, made once: the same feeds recur every step."""
        cached = self._name_arrays.get(names)
        if cached is None:
            cached = self._name_arrays[names] = to_js(list(names))
        return cached
