"""bench/decode_ceiling.py's inputs: the bytes a decode step reads from a file's weights, and the
WASM streaming probe (bench/wasm_stream.mjs) it divides them by."""

import json
import os
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.decode_ceiling import ROOT, weight_bytes


def test_weights_are_counted_as_the_engine_holds_them(tmp_path):
    """fp16 weights behind a Cast count as fp32 (folded at load); a Gather table, even through a
    folded Transpose, costs one row; other initializers count whole, each once."""
    table = np.zeros((4, 10), np.float16)                      # [hidden, vocab], tied
    up = np.zeros((4, 6), np.float16)
    norm = np.ones(4, np.float32)
    nodes = [
        helper.make_node("Transpose", ["head"], ["table"], perm=[1, 0]),
        helper.make_node("Gather", ["table", "ids"], ["row16"]),
        helper.make_node("Cast", ["row16"], ["row"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["row", "norm"], ["x"]),
        helper.make_node("Cast", ["up16"], ["up32"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["x", "up32"], ["h"]),
        helper.make_node("Cast", ["head"], ["head32"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["x", "head32"], ["logits"]),
        helper.make_node("Mul", ["x", "norm"], ["again"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 1])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("h", "logits", "again")],
        [numpy_helper.from_array(table, "head"), numpy_helper.from_array(up, "up16"),
         numpy_helper.from_array(norm, "norm")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), path)
    got = weight_bytes(str(path))
    assert got == {"matmul": (4 * 6 + 4 * 10) * 4, "gathered_rows": 4 * 2, "other": 4 * 4,
                   "total": (4 * 6 + 4 * 10) * 4 + 4 * 2 + 4 * 4}


def _stream(*args):
    return subprocess.run(["node", os.path.join(ROOT, "bench", "wasm_stream.mjs"), *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_the_stream_probe_reads_what_it_was_asked_and_checks_its_sum():
    out = _stream("--bytes", "1000000", "--runs", "2")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["bytes"] == 1000000 and got["runs"] == 2      # 1e6 is a multiple of 64
    assert got["seconds"] > 0 and got["bytes_per_second"] == got["bytes"] / got["seconds"]


def test_the_stream_probe_refuses_a_size_it_cannot_hold():
    for bad in (["--bytes", "0"], ["--bytes", str(2 ** 31)], ["--runs", "0"]):
        out = _stream(*bad)
        assert out.returncode == 2 and "usage: wasm_stream.mjs" in out.stderr, bad
