"""How fast Kokoro-82M can be in onnxruntime-web's WASM on one thread, from its arithmetic.

Counts the multiply-adds of every matrix op in the bundle's browser file on one sentence (an
onnxruntime profile gives each node's shapes), then measures onnxruntime-web's own kernels on
one thread in Node on the file's dominant product (the k = 11, 128-channel convolution at
24 kHz / 5 frames: [frames, 128 x 11] x [128 x 11, 128]): uint8 x int8 MatMulInteger (what
kokoro.wasm.onnx runs) and fp32 MatMul. multiply-adds / best rate = the time the products alone
take, a floor under any file that computes the same products; it is printed as the real-time
factor it allows. A benchmark, not a test.

    PYTHONPATH=py python bench/kokoro_ceiling.py [BUNDLE] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = "The quick brown fox jumps over the lazy dog near the quiet river bank."   # bench/kokoro_rtf.py's
SAMPLE_RATE = 24000

NODE_TIMER = r"""
import * as ort from 'onnxruntime-web';
ort.env.wasm.numThreads = 1;
const [file, m, k, n, kind, runs] = process.argv.slice(1);
const M = +m, K = +k, N = +n;
const session = await ort.InferenceSession.create(file, { executionProviders: ['wasm'] });
const a = kind === 'int8' ? new ort.Tensor('uint8', Uint8Array.from({ length: M * K }, (_, i) => (i * 37) % 251), [M, K])
                          : new ort.Tensor('float32', Float32Array.from({ length: M * K }, (_, i) => ((i * 37) % 251) / 251 - 0.5), [M, K]);
await session.run({ a });
const times = [];
for (let i = 0; i < +runs; i++) { const t = performance.now(); await session.run({ a }); times.push(performance.now() - t); }
console.log(JSON.stringify({ seconds: Math.min(...times) / 1000 }));
"""


def count_macs(bundle: str, file: str) -> tuple[float, dict, float]:
    """(multiply-adds, per op type, audio seconds) of ``file`` speaking TEXT natively."""
    import onnxruntime as ort

    import onnxpipe

    pipe = onnxpipe.load(bundle, variant="wasm")
    spoken = pipe.speak(TEXT, voice="jm_kumo")
    ids = spoken.sentences[0].ids
    with np.load(_voices()) as npz:
        style = npz["jm_kumo"][min(len(ids) - 2, 510) - 1].reshape(1, 256).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # nodes keep the file's names
        options.profile_file_prefix = os.path.join(tmp, "p")
        session = ort.InferenceSession(os.path.join(bundle, file), options, providers=["CPUExecutionProvider"])
        audio = session.run(None, {"tokens": np.array([ids], np.int64), "style": style,
                                   "speed": np.array([1.0], np.float32)})[0]
        with open(session.end_profiling(), encoding="utf-8") as f:
            events = json.load(f)
    graph, dims = _graph(os.path.join(bundle, file))
    per_op: dict = collections.defaultdict(float)
    for event in events:
        args = event.get("args", {})
        if event.get("cat") != "Node" or "op_name" not in args or not event["name"].endswith("_kernel_time"):
            continue
        profiled = [_shape(s) for s in args.get("input_type_shape", [])]
        names = graph.get(event["name"][:-len("_kernel_time")])
        inputs = _input_shapes(names, dims, profiled) if names else profiled
        macs = _macs(args["op_name"], inputs, [_shape(s) for s in args.get("output_type_shape", [])])
        per_op[args["op_name"]] += macs
    return sum(per_op.values()), dict(per_op), audio.size / SAMPLE_RATE


def _graph(path: str) -> tuple[dict, dict]:
    """(node name -> its input names, initializer name -> dims)."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    return ({n.name: list(n.input) for n in model.graph.node},
            {t.name: list(t.dims) for t in model.graph.initializer})


def _input_shapes(names: list[str], dims: dict, profiled: list[list[int]]) -> list[list[int]]:
    """Every input's shape: the profile lists only the inputs that are not initializers."""
    rest = iter(profiled)
    return [dims[name] if name in dims else (next(rest, []) if name else []) for name in names]


def _voices() -> str:
    from onnxpipe.export.kokoro import sources

    return sources()["voices"]


def _shape(entry: dict) -> list[int]:
    return next(iter(entry.values())) if entry else []


def _macs(op: str, inputs: list[list[int]], outputs: list[list[int]]) -> float:
    if op in ("MatMul", "MatMulInteger", "Gemm") and len(inputs) >= 2 and outputs:
        return float(np.prod(outputs[0])) * inputs[0][-1]
    if op in ("Conv", "ConvInteger") and outputs:
        w = inputs[1]
        return float(np.prod(outputs[0])) * float(np.prod(w[1:]))
    if op == "ConvTranspose":
        w = inputs[1]             # [C_in, C_out / group, k]
        return float(np.prod(inputs[0])) * float(np.prod(w[1:]))
    if op == "LSTM":
        x, w, r = inputs[0], inputs[1], inputs[2]   # [T, B, I], [D, 4H, I], [D, 4H, H]
        return float(x[0] * x[1]) * w[0] * w[1] * (w[2] + r[2])
    if op == "DynamicQuantizeLSTM":
        x, w, r = inputs[0], inputs[1], inputs[2]   # [T, B, I], [D, I, 4H], [D, H, 4H]
        return float(x[0] * x[1]) * w[0] * w[2] * (w[1] + r[1])
    return 0.0


def gemm_models(tmp: str, m: int, k: int, n: int) -> dict:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    files = {}
    for kind in ("int8", "fp32"):
        if kind == "int8":
            b = numpy_helper.from_array(rng.integers(-128, 128, (k, n), dtype=np.int8), "b")
            node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
            a_type, y_type = TensorProto.UINT8, TensorProto.INT32
        else:
            b = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "b")
            node = helper.make_node("MatMul", ["a", "b"], ["y"])
            a_type, y_type = TensorProto.FLOAT, TensorProto.FLOAT
        graph = helper.make_graph([node], kind, [helper.make_tensor_value_info("a", a_type, [m, k])],
                                  [helper.make_tensor_value_info("y", y_type, [m, n])], [b])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        files[kind] = os.path.join(tmp, f"{kind}.onnx")
        onnx.save(model, files[kind])
    return files


def wasm_rates(m: int, k: int, n: int, runs: int = 5) -> dict:
    """multiply-adds per second of onnxruntime-web's 1-thread kernels on [m, k] x [k, n]."""
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, file in gemm_models(tmp, m, k, n).items():
            out = subprocess.run(["node", "--input-type=module", "-e", NODE_TIMER, file, str(m), str(k), str(n),
                                  kind, str(runs)], check=True, capture_output=True, text=True, cwd=ROOT)
            seconds = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
            rates[kind] = {"seconds": seconds, "macs_per_second": m * k * n / seconds}
    return rates


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join("public", "models", "kokoro-82m"))
    parser.add_argument("--file", default="kokoro.wasm.onnx")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    macs, per_op, audio_seconds = count_macs(args.bundle, args.file)
    frames = int(audio_seconds * SAMPLE_RATE / 5)
    rates = wasm_rates(frames, 128 * 11, 128)
    best = max(r["macs_per_second"] for r in rates.values())
    floor = macs / best
    report = {"file": args.file, "audio_seconds": audio_seconds, "macs": macs, "macs_by_op": per_op,
              "wasm_1_thread": rates, "products_alone_seconds": floor,
              "best_real_time_factor": audio_seconds / floor}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{args.file}: {audio_seconds:.2f} s of audio, {macs / 1e9:.1f} G multiply-adds "
          f"({macs / 1e9 / audio_seconds:.1f} G per second of audio)")
    for op, value in sorted(per_op.items(), key=lambda kv: -kv[1]):
        if value:
            print(f"  {op:<16}{value / 1e9:>8.1f} G")
    print(f"onnxruntime-web WASM, 1 thread, [{frames}, 1408] x [1408, 128]:")
    for kind, r in rates.items():
        print(f"  {kind:<6}{r['seconds'] * 1000:>8.0f} ms  {r['macs_per_second'] / 1e9:>6.1f} G multiply-adds/s")
    print(f"the products alone at the best rate: {floor:.2f} s -> at most {audio_seconds / floor:.2f}x real time "
          f"on 1 thread, before any other op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
