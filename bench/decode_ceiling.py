"""How fast SmolLM2's faithful WASM file can decode on one thread, from its bytes.

A decode step multiplies one token's activations by every weight matrix once, so each step
streams all MatMul weights from memory (as fp32 in the wasm heap: onnxruntime-web folds the
file's fp16-to-fp32 Casts at load, and WASM has no fp16 arithmetic). Three figures, all in
Node on one thread (V8, the engine Chromium runs onnxruntime-web's WASM in):

- bytes per token: the MatMul weights of the file (``--file``), counted from the graph;
- the rate one WASM thread can stream memory at all (bench/wasm_stream.mjs: SIMD loads, no work);
- one greedy decode of the file in onnxruntime-web with its profiler on
  (bench/wasm_decode_profile.mjs): each step's time in MatMul, in every other op, and outside
  the kernels.

Ceilings: weights / stream rate (nothing else at all), then that plus the other ops and the
per-step cost as measured (a MatMul kernel as fast as memory allows). A benchmark, not a test.

    PYTHONPATH=py python bench/decode_ceiling.py [BUNDLE] [--file model.wasm.onnx] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = 36.0   # issue 12: >= 1.5x transformers.js's 24 tokens/s at 1 thread
FOLDED = ("Cast", "Transpose")
_ITEMSIZE = {1: 4, 10: 2, 11: 8, 2: 1, 3: 1, 6: 4, 7: 8, 16: 2}   # onnx TensorProto types -> bytes


def weight_bytes(path: str) -> dict:
    """Bytes one decode step reads from the file's weights: every MatMul/Gemm weight whole (as
    the type it is computed in, after a Cast the engine folds), one row of each Gather table,
    and the rest (norm scales and such) whole."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    sizes = {t.name: (math.prod(t.dims), _ITEMSIZE.get(t.data_type, 4), list(t.dims)) for t in graph.initializer}
    for node in graph.node:            # a Cast or Transpose of a weight is folded at load: its output is the weight
        if node.op_type in FOLDED and node.input[0] in sizes:
            count, itemsize, dims = sizes[node.input[0]]
            attrs = {a.name: a for a in node.attribute}
            if node.op_type == "Cast":
                itemsize = _ITEMSIZE.get(attrs["to"].i, 4)
            else:
                dims = [dims[i] for i in attrs["perm"].ints] if "perm" in attrs else dims[::-1]
            sizes[node.output[0]] = (count, itemsize, dims)
    matmul = gathered = other = 0
    used = set()
    for node in graph.node:
        if node.op_type in FOLDED and node.input[0] in sizes:
            continue
        for position, name in enumerate(node.input):
            if name not in sizes or name in used:
                continue
            used.add(name)
            count, itemsize, dims = sizes[name]
            if node.op_type in ("MatMul", "Gemm") and position == 1:
                matmul += count * itemsize
            elif node.op_type == "Gather" and position == 0:
                gathered += (count // max(dims[0], 1)) * itemsize
            else:
                other += count * itemsize
    return {"matmul": matmul, "gathered_rows": gathered, "other": other, "total": matmul + gathered + other}


def stream_rate(size: int) -> dict:
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "wasm_stream.mjs"), "--bytes", str(size)],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def profile_decode(path: str, tokens: int, prompt: int) -> dict:
    """Per step (the last two thirds of ``tokens``, warm): median wall time without the profiler,
    and the medians of the kernel time per op type in the profiled decode."""
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "wasm_decode_profile.mjs"), path,
                          "--tokens", str(tokens), "--prompt", str(prompt)],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    events, result = [], None
    for line in out.stdout.splitlines():
        if line.startswith('{"cat"'):
            events.append(json.loads(line.rstrip().rstrip(",")))
        elif line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    if result is None:
        raise RuntimeError(f"wasm_decode_profile.mjs printed no RESULT line:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])[1:]   # [0]: prefill
    warm = runs[len(runs) // 3:]
    nodes = sorted((e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")),
                   key=lambda e: e["ts"])
    per_run = []
    for run in warm:
        ops: dict = collections.defaultdict(float)
        for e in nodes:
            if run["ts"] <= e["ts"] <= run["ts"] + run["dur"]:
                ops[e["args"].get("op_name", "?")] += e["dur"] / 1e6
        per_run.append(ops)
    op_names = {name for ops in per_run for name in ops}
    kernels = {name: statistics.median(ops.get(name, 0.0) for ops in per_run) for name in op_names}
    profiled = statistics.median(result["profiled_step_seconds"][len(result["profiled_step_seconds"]) // 3:])
    step = statistics.median(result["step_seconds"][len(result["step_seconds"]) // 3:])
    # the profiler slows every kernel a little: its split is applied to the unprofiled step
    share = {name: seconds / profiled for name, seconds in kernels.items()}
    share["outside the kernels"] = max(1 - sum(share.values()), 0.0)
    return {"step_seconds": step, "profiled_step_seconds": profiled, "share": share, "steps": len(warm)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join("public", "models", "smollm2-135m-instruct"))
    parser.add_argument("--file", default="model.wasm.onnx")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=37, help="prompt length in tokens (the issue's chat prompt: 37)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    path = os.path.join(args.bundle, args.file)
    if not os.path.isfile(path):
        parser.error(f"{path}: no such file (build it with `make models`)")
    weights = weight_bytes(path)
    stream = stream_rate(weights["matmul"])
    profile = profile_decode(path, args.tokens, args.prompt)
    step = profile["step_seconds"]
    parts = {name: share * step for name, share in profile["share"].items()}
    matmul = parts.get("MatMul", 0.0)
    rest = step - matmul
    weights_only = weights["matmul"] / stream["bytes_per_second"]
    best_kernel = weights_only + rest
    report = {"file": args.file, "weight_bytes": weights, "stream": stream, "profile": profile,
              "matmul_bytes_per_second": weights["matmul"] / matmul if matmul else None,
              "ceiling_weights_only_tokens_per_s": 1 / weights_only,
              "ceiling_best_matmul_tokens_per_s": 1 / best_kernel,
              "measured_tokens_per_s": 1 / profile["step_seconds"], "target_tokens_per_s": TARGET}
    if args.json:
        print(json.dumps(report))
        return 0
    mb = 1e6
    print(f"{args.file}: {weights['matmul'] / mb:.0f} MB of MatMul weights read per token (fp32 in the heap), "
          f"+ {weights['gathered_rows'] / mb:.3f} MB of embedding rows, + {weights['other'] / mb:.2f} MB other")
    print(f"one WASM thread streams memory at {stream['bytes_per_second'] / 1e9:.1f} GB/s "
          f"(bench/wasm_stream.mjs over {stream['bytes'] / mb:.0f} MB, best of {stream['runs']})")
    print(f"onnxruntime-web decode, 1 thread ({profile['steps']} warm steps after a {args.prompt}-token prompt; "
          "the step timed without the profiler, its split from a profiled decode):")
    print(f"  step {profile['step_seconds'] * 1000:6.1f} ms = {1 / profile['step_seconds']:.1f} tokens/s")
    for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1])[:7]:
        print(f"  {name:<34}{seconds * 1000:6.2f} ms")
    if matmul:
        print(f"  MatMul streams its weights at {report['matmul_bytes_per_second'] / 1e9:.1f} GB/s, "
              f"{report['matmul_bytes_per_second'] / stream['bytes_per_second']:.0%} of what the thread can stream")
    print("ceilings on this machine, 1 thread:")
    print(f"  the weights at the streaming rate and nothing else:      {1 / weights_only:6.1f} tokens/s")
    print(f"  MatMul at the streaming rate, the rest as measured:      {1 / best_kernel:6.1f} tokens/s")
    print(f"  target (issue 12):                                       {TARGET:6.1f} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
