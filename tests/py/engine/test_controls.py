"""``pipeline.inputs``: caller controls with defaults, ranges, choices and packing into one tensor.

A tiny single-pass "voice" whose output is ``ids * scales[1] + scales[0]`` (as floats), so
the packed tensor's values and order show in the result.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_builders as ob
import onnxpipe
from onnxpipe.errors import ConfigError, InputError

CONTROLS = {
    "offset": {"default": 0.5, "min": -1.0, "max": 1.0, "doc": "added"},
    "gain": {"default": 2.0, "min": 0.0, "max": 4.0, "doc": "multiplied"},
    "scales": {"dtype": "float32", "pack": ["offset", "gain"]},
}


def build(tmp_path, inputs=None, scales_from="scales"):
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Gather", ["scales", "zero"], ["offset"], axis=0),
        helper.make_node("Gather", ["scales", "one"], ["gain"], axis=0),
        helper.make_node("Mul", ["f", "gain"], ["g"]),
        helper.make_node("Add", ["g", "offset"], ["out"]),
    ]
    graph = helper.make_graph(nodes, "voice", [vi("ids", TensorProto.INT64, [1, "n"]),
                                                vi("scales", TensorProto.FLOAT, [2])],
                              [vi("out", TensorProto.FLOAT, [1, "n"])],
                              [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                               numpy_helper.from_array(np.array(1, np.int64), "one")])
    ob.save_graph(graph, tmp_path / "voice.onnx")
    (tmp_path / "pipeline.json").write_text(json.dumps({
        "version": 2,
        "pipeline": {"sessions": {"voice": {"file": "voice.onnx"}},
                     "flow": [{"run": "voice", "when": "init"}],
                     "dataflow": [{"from": "inputs.phoneme_ids", "to": "voice.ids"},
                                  {"from": f"inputs.{scales_from}", "to": "voice.scales"}],
                     "inputs": CONTROLS if inputs is None else inputs,
                     "output": {"session": "voice", "name": "out"}},
        "generation": {"loop": "single_pass"}}))


def run(pipe, **controls):
    values, _ = pipe.run(inputs={"phoneme_ids": ([1, 2, 3], (1, 3))}, **controls).read()
    return [round(v, 5) for v in values]


def test_defaults_are_packed_in_declared_order(tmp_path):
    build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    assert run(pipe) == [2.5, 4.5, 6.5]
    assert [c.name for c in pipe.controls] == ["offset", "gain"]   # the packed tensor is no control
    assert pipe.controls[1].to_dict() == {"name": "gain", "default": 2.0, "min": 0.0, "max": 4.0, "doc": "multiplied",
                                          "options": []}


CHOICE = {"preset": {"dtype": "float32", "shape": [2], "default": "plain", "doc": "offset and gain",
                     "options": {"plain": [0.0, 1.0], "loud": [1.0, 3.0]}}}


def test_a_choice_control_gives_the_flow_its_options_value(tmp_path):
    build(tmp_path, CHOICE, scales_from="preset")
    pipe = onnxpipe.load(tmp_path)
    assert run(pipe) == [1.0, 2.0, 3.0]
    assert run(pipe, preset="loud") == [4.0, 7.0, 10.0]
    assert [c.to_dict() for c in pipe.controls] == [{"name": "preset", "default": "plain", "min": None, "max": None,
                                                     "doc": "offset and gain", "options": ["plain", "loud"]}]
    for bad in ("medium", 1.0, ["loud"]):
        with pytest.raises(InputError) as info:
            run(pipe, preset=bad)
        assert info.value.message.startswith(f"preset: expected one of plain, loud, found {bad!r}")
    assert run(pipe, preset="loud") == [4.0, 7.0, 10.0]


@pytest.mark.parametrize("edit, path, words", [
    ({"default": "medium"}, "$.pipeline.inputs.preset.default", ["expected one of plain, loud, found 'medium'"]),
    ({"default": None}, "$.pipeline.inputs.preset.default", ["expected one of plain, loud, found None"]),
    ({"options": {"plain": [0.0], "loud": [1.0, 3.0]}}, "$.pipeline.inputs.preset.options.plain",
     ['option "plain": expected 2 number(s) for shape [2], found [0.0]']),
    ({"options": {"plain": "zero"}}, "$.pipeline.inputs.preset.options.plain", ["expected 2 number(s)"]),
    ({"max": 3.0}, "$.pipeline.inputs.preset.max", ["a choice control (options) takes no range"]),
    ({"pack": ["x"]}, "$.pipeline.inputs.preset.pack", ["cannot also be a pack"]),
])
def test_bad_choice_declarations_are_config_errors(tmp_path, edit, path, words):
    build(tmp_path, {"preset": {**CHOICE["preset"], **edit}}, scales_from="preset")
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(tmp_path)
    assert info.value.path == path, info.value.message
    for word in words:
        assert word in info.value.message


def test_a_caller_sets_one_control_and_keeps_the_other_default(tmp_path):
    build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    assert run(pipe, gain=0) == [0.5, 0.5, 0.5]
    assert run(pipe, offset=-1, gain=1) == [0.0, 1.0, 2.0]
    assert run(pipe, scales=[0.0, 3.0]) == [3.0, 6.0, 9.0]   # or the whole tensor


@pytest.mark.parametrize("controls, words", [
    ({"gian": 1}, ['unknown control "gian"', 'Did you mean "gain"?', "offset, gain, scales"]),
    ({"gain": 5}, ['"gain" = 5 is outside its range [0.0, 4.0]']),
    ({"gain": "loud"}, ['control "gain": expected 1 number(s), found \'loud\'']),
    ({"scales": [1.0]}, ['control "scales": expected 2 number(s)']),
])
def test_bad_controls_are_input_errors_and_the_pipeline_still_runs(tmp_path, controls, words):
    build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    with pytest.raises(InputError) as info:
        run(pipe, **controls)
    for word in words:
        assert word in info.value.message
    assert run(pipe) == [2.5, 4.5, 6.5]


@pytest.mark.parametrize("inputs, path, words", [
    ({"a": {"default": 1.0}, "scales": {"pack": ["a", "b"]}}, "$.pipeline.inputs.scales.pack[1]",
     ['pack names "b", which is not declared']),
    ({"gain": {"default": 9.0, "max": 4.0}, "scales": {"pack": ["gain", "gain"]}}, "$.pipeline.inputs.gain.default",
     ['"gain" = 9.0 is outside its range']),
    ({"gain": {"default": [1.0, 2.0]}, "scales": {"pack": ["gain", "gain"]}}, "$.pipeline.inputs.gain.default",
     ["expected 1 number(s) for shape []"]),
    ({"gain": {"default": 1.0, "dtype": "float23"}}, "$.pipeline.inputs.gain.dtype",
     ['unknown gain dtype "float23"', "float32"]),
])
def test_bad_declarations_are_config_errors_naming_the_json_path(tmp_path, inputs, path, words):
    build(tmp_path, inputs)
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(tmp_path)
    assert info.value.path == path, info.value.message
    assert str(tmp_path / "pipeline.json") in info.value.message
    for word in words:
        assert word in info.value.message
