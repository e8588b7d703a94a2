"""``generation.loop: single_pass``: the flow runs once on caller inputs; outputs come back.

Two sessions written for this test: ``encoder`` (ids [1, n] -> hidden [1, n, 4] from a table)
then ``vocoder`` (hidden -> waveform [1, n * 4] = 0.5 * hidden, flattened), declared with
``pipeline.output``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_builders as ob
import onnxpipe
from onnxpipe.errors import InputError


def build(tmp_path):
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    vi = helper.make_tensor_value_info
    graphs = {
        "encoder": helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["hidden"])], "encoder",
                                     [vi("ids", TensorProto.INT64, [1, "n"])], [vi("hidden", TensorProto.FLOAT, [1, "n", 4])],
                                     [numpy_helper.from_array(table, "table")]),
        "vocoder": helper.make_graph([helper.make_node("Mul", ["hidden", "half"], ["h2"]),
                                      helper.make_node("Reshape", ["h2", "flat"], ["waveform"])], "vocoder",
                                     [vi("hidden", TensorProto.FLOAT, [1, "n", 4])], [vi("waveform", TensorProto.FLOAT, [1, "m"])],
                                     [numpy_helper.from_array(np.array([0.5], np.float32), "half"),
                                      numpy_helper.from_array(np.array([1, -1], np.int64), "flat")]),
    }
    for name, graph in graphs.items():
        ob.save_graph(graph, tmp_path / f"{name}.onnx")
    (tmp_path / "pipeline.json").write_text(json.dumps({
        "version": 2,
        "pipeline": {
            "sessions": {"encoder": {"file": "encoder.onnx"}, "vocoder": {"file": "vocoder.onnx"}},
            "flow": [{"run": "encoder", "when": "init"}, {"run": "vocoder", "when": "init"}],
            "dataflow": [{"from": "inputs.phoneme_ids", "to": "encoder.ids"}],
            "output": {"session": "vocoder", "name": "waveform"},
        },
        "generation": {"loop": "single_pass"}}))
    return table


def test_runs_once_and_returns_the_declared_output(tmp_path):
    table = build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    result = pipe.run(inputs={"phoneme_ids": ([3, 1, 4], (1, 3))})
    values, shape = result.read()
    assert shape == (1, 12)
    np.testing.assert_array_equal(np.array(values, np.float32), (table[[3, 1, 4]] * 0.5).reshape(-1))
    assert result.compute_seconds > 0


def test_single_pass_asks_for_its_inputs_and_refuses_generate(tmp_path):
    build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    with pytest.raises(InputError, match="needs input"):
        pipe.run()
    with pytest.raises(InputError, match='use run'):
        pipe.generate(input_ids=[1])
    with pytest.raises(InputError, match='no output "spectrogram"'):
        pipe.run(inputs={"phoneme_ids": ([1], (1, 1))}).read("spectrogram")
