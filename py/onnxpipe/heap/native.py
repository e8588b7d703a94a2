"""A heap plan carried out on disk, natively (numpy): for tests and the command line.

In the browser the worker makes the planned weights itself (workers/heap-weights.ts) and hands
onnxruntime-web the edited graph with buffers; here the same plan is written to a folder that
native onnxruntime opens (the edited graph, each mounted slice and each expanded weight as a
file of its own), so a test can compare it with the original file, and

    python -m onnxpipe.heap.native MODEL.onnx OUT_DIR [--expand auto|all|none] [--budget-mb N]

rewrites a model for onnxruntime-web ahead of time. CPython only.
"""

from __future__ import annotations

import argparse
import json
import os

from .plan import EXPAND_MODES, HeapPlan, plan_file


def nbits_to_float32(spec: dict, read) -> "np.ndarray":  # noqa: F821
    """The [K, N] fp32 weight of a "nbits_to_float32" spec; ``read(slice_dict) -> bytes``."""
    import numpy as np

    k, n, bits, block = spec["k"], spec["n"], spec["bits"], spec["block_size"]
    blocks = k // block
    raw = np.frombuffer(read(spec["b"]), np.uint8).reshape(n, blocks, block * bits // 8)
    if bits == 4:
        q = np.stack([raw & 0x0F, raw >> 4], axis=-1).reshape(n, blocks, block)
    else:
        q = raw
    scale_type = np.float16 if spec["scales_dtype"] == "float16" else np.float32
    scales = np.frombuffer(read(spec["scales"]), scale_type).astype(np.float32).reshape(n, blocks)
    if spec["zero_points"] is not None:
        packed = np.frombuffer(read(spec["zero_points"]), np.uint8)
        if bits == 4:
            per_row = (blocks + 1) // 2
            packed = packed.reshape(n, per_row)
            zp = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(n, per_row * 2)[:, :blocks]
        else:
            zp = packed.reshape(n, blocks)
    else:
        zp = np.full((n, blocks), 1 << (bits - 1), np.uint8)
    centred = q.astype(np.int32) - zp.astype(np.int32)[:, :, None]
    w = (centred.astype(np.float32) * scales[:, :, None]).reshape(n, k)
    return np.ascontiguousarray(w.T)


def float16_to_float32(spec: dict, read) -> "np.ndarray":  # noqa: F821
    """The fp32 values of a "float16_to_float32" spec's fp16 weight."""
    import numpy as np

    return np.frombuffer(read(spec["data"]), np.float16).astype(np.float32)


MATERIALIZERS = {"nbits_to_float32": nbits_to_float32, "float16_to_float32": float16_to_float32}


def write_plan(plan: HeapPlan, bundle_dir: str, out_dir: str, name: str = "model.onnx") -> str:
    """Write ``plan`` (made for a file of ``bundle_dir``) to ``out_dir``; returns the model path."""
    os.makedirs(out_dir, exist_ok=True)

    def read(s) -> bytes:
        file, start, end = (s.file, s.start, s.end) if hasattr(s, "file") else (s["file"], s["start"], s["end"])
        with open(os.path.join(bundle_dir, file), "rb") as f:
            f.seek(start)
            return f.read(end - start)

    for location, s in plan.mounts.items():
        path = os.path.join(out_dir, location)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(read(s))
    for spec in plan.materialize:
        path = os.path.join(out_dir, spec["out"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        MATERIALIZERS[spec["kind"]](spec, read).tofile(path)
    model = os.path.join(out_dir, name)
    with open(model, "wb") as f:
        f.write(plan.model)
    return model


def main(argv=None) -> int:
    from ..onnx_info import FileSource

    p = argparse.ArgumentParser(prog="python -m onnxpipe.heap.native", description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("out_dir")
    p.add_argument("--expand", choices=EXPAND_MODES, default="all")
    p.add_argument("--budget-mb", type=float, help="heap bytes the weights may take (--expand auto)")
    a = p.parse_args(argv)
    bundle_dir, rel = os.path.split(os.path.abspath(a.model))
    source = FileSource(a.model)
    try:
        plan = plan_file(source, rel, a.expand, int(a.budget_mb * 2**20) if a.budget_mb else None)
    finally:
        source.close()
    path = write_plan(plan, bundle_dir, a.out_dir, rel)
    print(json.dumps({"model": path, **plan.summary()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
