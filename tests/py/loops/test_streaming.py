"""``generation.loop: streaming`` on a tiny recurrent model written for this test.

Sessions (onnx.helper):
- ``gain`` (init): ``scale`` [1] -> ``g`` [1] = 2 * scale;
- ``acc`` (step): ``x`` [1, n] (the chunk with its context), ``h`` [1, 1] (state), ``rate``
  int64 scalar, ``g`` -> ``h_next`` = h + g * sum(x), ``p`` = h_next + rate (one number per chunk);
- ``twice`` (final): ``p`` -> ``double`` = 2 * p.

So the value of chunk i is rate + g * (sum of every window so far): exact in float32 for the
small integer samples used here, and each window (context + chunk) is visible in it.
"""

from __future__ import annotations

import copy
import json
from array import array

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_builders as ob
import onnxpipe
from onnxpipe.errors import ConfigError, EngineError
from onnxpipe.loops import Streaming

CHUNK, CONTEXT, RATE = 4, 2, 8000
SEGMENTS = {"threshold": "threshold", "negative_threshold": "negative_threshold",
            "min_silence_ms": "min_silence_ms", "speech_pad_ms": "speech_pad_ms",
            "min_speech_ms": "min_speech_ms"}


def config() -> dict:
    return {
        "version": 2,
        "pipeline": {
            "sessions": {"gain": {"file": "gain.onnx"}, "acc": {"file": "acc.onnx"},
                         "twice": {"file": "twice.onnx"}},
            "flow": [{"run": "gain", "when": "init"}, {"run": "acc", "when": "step"},
                     {"run": "twice", "when": "final"}],
            "dataflow": [{"from": "inputs.samples", "to": "acc.x"},
                         {"from": "inputs.rate", "to": "acc.rate"}],
            "state": {"recurrent": [{"input": "h", "output": "h_next", "shape": [1, 1]}]},
            "inputs": {"scale": {"shape": [1], "default": 0.5},
                       "threshold": {"default": 0.5, "min": 0, "max": 1},
                       "negative_threshold": {"default": 0.35, "min": 0, "max": 1},
                       "min_silence_ms": {"default": 1}, "speech_pad_ms": {"default": 0},
                       "min_speech_ms": {"default": 0}},
            "output": {"session": "acc", "name": "p", "segments": dict(SEGMENTS)},
        },
        "generation": {"loop": "streaming",
                       "streaming": {"input": "samples", "chunk_size": CHUNK, "context": CONTEXT,
                                     "sample_rate": RATE, "sample_rate_input": "rate"}},
    }


def build(folder, doc=None, p_shape=(1, 1)):
    vi = helper.make_tensor_value_info
    f32 = TensorProto.FLOAT
    graphs = {
        "gain": helper.make_graph(
            [helper.make_node("Mul", ["scale", "two"], ["g"])], "gain",
            [vi("scale", f32, [1])], [vi("g", f32, [1])],
            [numpy_helper.from_array(np.array([2.0], np.float32), "two")]),
        "acc": helper.make_graph(
            [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1),       # [1, 1]
             helper.make_node("Mul", ["s", "g"], ["gs"]),
             helper.make_node("Add", ["h", "gs"], ["h_next"]),
             helper.make_node("Cast", ["rate"], ["rate_f"], to=f32),
             helper.make_node("Add", ["h_next", "rate_f"], ["p0"]),
             helper.make_node("Reshape", ["p0", "p_shape"], ["p"])], "acc",
            [vi("x", f32, [1, "n"]), vi("h", f32, [1, 1]), vi("rate", TensorProto.INT64, []),
             vi("g", f32, [1])],
            [vi("h_next", f32, [1, 1]), vi("p", f32, ["a", "b"])],
            [numpy_helper.from_array(np.array(p_shape, np.int64), "p_shape")]),
        "twice": helper.make_graph(
            [helper.make_node("Add", ["p", "p"], ["double"])], "twice",
            [vi("p", f32, ["a", "b"])], [vi("double", f32, ["a", "b"])]),
    }
    for name, graph in graphs.items():
        ob.save_graph(graph, folder / f"{name}.onnx")
    ob.write_json(folder / "pipeline.json", doc if doc is not None else config())
    return folder


def expected(samples: list[float], scale: float = 0.5) -> list[float]:
    """The loop's values by construction: zero-padded chunks, each with its context before it."""
    padded = list(samples) + [0.0] * (-len(samples) % CHUNK)
    audio = [0.0] * CONTEXT + padded
    out, total = [], 0.0
    for i in range(len(padded) // CHUNK):
        total += 2 * scale * sum(audio[i * CHUNK:i * CHUNK + CONTEXT + CHUNK])
        out.append(total + RATE)
    return out


class CountingBackend:
    """The real native backend, counting runs per session (to see which phase ran how often)."""

    def __init__(self):
        from onnxpipe.backends.native import NativeBackend
        self.inner = NativeBackend()
        self.runs: dict[str, int] = {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, session, feeds, outputs, bound=None):
        self.runs[session.name] = self.runs.get(session.name, 0) + 1
        return self.inner.run(session, feeds, outputs, bound)


def stream(pipe, pieces, **controls):
    loaded = pipe.loaded
    loop = Streaming(loaded.executor, loaded.spec.generation.streaming, loaded.inputs(None, controls))
    values = []
    for piece in pieces:
        values.extend(loop.feed(piece))
    values.extend(loop.finish())
    return loop, values


SAMPLES = [float(i % 7) - 3.0 for i in range(23)]   # 5 whole chunks and 3 samples


def test_one_value_per_chunk_with_context_state_and_zero_padding(tmp_path):
    pipe = onnxpipe.load(build(tmp_path))
    loop, values = stream(pipe, [SAMPLES[:3], SAMPLES[3:12], SAMPLES[12:13], SAMPLES[13:]])
    assert values == expected(SAMPLES)
    assert loop.chunks == 6 and loop.samples == len(SAMPLES)
    assert loop.final_outputs["double"].numpy().reshape(-1).tolist() == [2 * values[-1]]


def test_piece_sizes_do_not_matter_and_every_input_form_is_taken(tmp_path):
    pipe = onnxpipe.load(build(tmp_path))
    want = expected(SAMPLES)
    assert stream(pipe, [SAMPLES])[1] == want
    assert stream(pipe, [[v] for v in SAMPLES])[1] == want
    assert stream(pipe, [array("f", SAMPLES)])[1] == want
    assert stream(pipe, [np.array(SAMPLES, np.float64)])[1] == want
    assert stream(pipe, [array("f", SAMPLES).tobytes()])[1] == want
    # a control reaches the init flow
    assert stream(pipe, [SAMPLES], scale=[1.5])[1] == expected(SAMPLES, 1.5)


def test_init_once_step_per_chunk_final_once_and_a_new_stream_starts_clean(tmp_path):
    backend = CountingBackend()
    pipe = onnxpipe.load(build(tmp_path), backend=backend)
    first = stream(pipe, [SAMPLES[:10], SAMPLES[10:]])[1]
    assert backend.runs == {"gain": 1, "acc": 6, "twice": 1}
    again = stream(pipe, [SAMPLES])[1]   # the recurrent state and context start from zero again
    assert again == first
    assert backend.runs == {"gain": 2, "acc": 12, "twice": 2}


def test_a_per_chunk_output_of_more_than_one_number_is_an_engine_error(tmp_path):
    pipe = onnxpipe.load(build(tmp_path, p_shape=(1, 1)))
    assert stream(pipe, [SAMPLES[:4]])[1] == expected(SAMPLES[:4])
    wide = tmp_path / "wide"
    wide.mkdir()
    doc = config()
    doc["pipeline"]["sessions"]["acc"]["file"] = "acc.onnx"
    build(wide, doc)
    # a p of two numbers: an Expand makes [1, 2]
    import onnx
    model = onnx.load(str(wide / "acc.onnx"))
    model.graph.initializer.append(numpy_helper.from_array(np.array([1, 2], np.int64), "two_wide"))
    for node in model.graph.node:
        if node.op_type == "Reshape":
            node.op_type, node.input[1] = "Expand", "two_wide"
    onnx.save(model, str(wide / "acc.onnx"))
    with pytest.raises(EngineError, match="one number per chunk; chunk 1 made 2"):
        stream(onnxpipe.load(wide), [SAMPLES[:4]])


def edit(doc, path, value):
    """``path`` like "generation.streaming.chunk_size"; value None deletes the key."""
    doc = copy.deepcopy(doc)
    *head, last = path.split(".")
    node = doc
    for key in head:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return doc


BAD = [
    ("generation.streaming", None, "$.generation.streaming", 'needs "streaming"'),
    ("generation.streaming.chunk_size", 0, "$.generation.streaming.chunk_size", "expected chunk_size >= 1, found 0"),
    ("generation.streaming.context", -1, "$.generation.streaming.context", "expected context >= 0"),
    ("generation.streaming.sample_rate", 0, "$.generation.streaming.sample_rate", "sample_rate >= 1"),
    ("generation.streaming.chunk", 4, "$.generation.streaming.chunk", 'unknown key "chunk". Did you mean "chunk_size"?'),
    ("generation.streaming.input", "scale", "$.generation.streaming.input", "can't also be a caller input"),
    ("generation.streaming.sample_rate_input", "samples", "$.generation.streaming.sample_rate_input",
     "input and sample_rate_input are both"),
    ("generation.loop", "single_pass", "$.generation.streaming", '"streaming" is for generation.loop "streaming"'),
    ("pipeline.output.segments", None, "$.pipeline.output", 'it needs "output" with "segments"'),
    ("pipeline.output.segments.threshold", "treshold", "$.pipeline.output.segments.threshold",
     'names pipeline input "treshold", which pipeline.inputs does not declare. Did you mean "threshold"?'),
    ("pipeline.output.segments.min_speech_ms", "scale", "$.pipeline.output.segments.min_speech_ms",
     "must be a scalar number with a default"),
    ("pipeline.output.segments.speed", "x", "$.pipeline.output.segments.speed", 'unknown key "speed"'),
    ("pipeline.inputs.negative_threshold.default", 0.6, "$.pipeline.output.segments",
     "negative_threshold (0.6) must not be above threshold (0.5)"),
    ("pipeline.state.recurrent", [{"input": "h", "output": "h_next", "shape": [1, 2]}],
     "$.pipeline.state.recurrent[0].shape", 'shape [1, 2] does not fit session "acc" input "h", which is [1, 1]'),
    ("pipeline.state.recurrent", [{"input": "h", "output": "h_next", "shape": [1]}],
     "$.pipeline.state.recurrent[0].shape", "shape [1] does not fit"),
    ("pipeline.state.recurrent", [{"input": "h", "output": "h_next", "shape": [1, 1], "dtype": "float16"}],
     "$.pipeline.state.recurrent[0].dtype", 'dtype "float16" does not match session "acc" input "h", which is float32'),
    ("pipeline.output", {"session": "twice", "name": "double", "segments": SEGMENTS},
     "$.pipeline.output.session", 'session "twice" must run in the step phase'),
]


@pytest.mark.parametrize("path,value,where,message", BAD, ids=[b[0] + "=" + str(b[1])[:20] for b in BAD])
def test_config_errors_name_the_file_the_path_and_what_is_wrong(tmp_path, path, value, where, message):
    build(tmp_path, edit(config(), path, value))
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(tmp_path)
    text = str(err.value)
    assert "pipeline.json" in text and where in text and message in text, text


def test_the_streamed_input_must_feed_a_step_session_and_only_those(tmp_path):
    doc = config()
    doc["pipeline"]["dataflow"][0] = {"from": "inputs.samples", "to": "gain.scale"}
    doc["pipeline"]["dataflow"].append({"from": "inputs.xs", "to": "acc.x"})
    doc["pipeline"]["inputs"]["xs"] = {"shape": [1, 4], "default": [0, 0, 0, 0]}
    del doc["pipeline"]["inputs"]["scale"]
    build(tmp_path, doc)
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(tmp_path)
    assert "$.generation.streaming.input" in str(err.value)
    assert 'input "samples" feeds no session of the step phase' in str(err.value)
    doc = config()
    doc["pipeline"]["dataflow"].append({"from": "inputs.samples", "to": "gain.scale"})
    del doc["pipeline"]["inputs"]["scale"]
    build(tmp_path, doc)
    with pytest.raises(ConfigError, match='input "samples" feeds a session of the init phase, which runs once'):
        onnxpipe.load(tmp_path)


def test_the_sample_rate_input_must_feed_something(tmp_path):
    doc = config()
    doc["pipeline"]["dataflow"][1] = {"from": "inputs.rate_given", "to": "acc.rate"}
    doc["pipeline"]["inputs"]["rate_given"] = {"dtype": "int64", "default": RATE}
    build(tmp_path, doc)
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(tmp_path)
    assert "$.generation.streaming.sample_rate_input" in str(err.value)
    assert 'sample_rate_input "rate" feeds no session input' in str(err.value)


def test_segments_need_the_streaming_loop(tmp_path):
    doc = edit(config(), "generation.loop", "single_pass")
    doc = edit(doc, "generation.streaming", None)
    build(tmp_path, doc)
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(tmp_path)
    assert "$.pipeline.output.segments" in str(err.value) and 'need generation.loop "streaming"' in str(err.value)


def test_kind_is_voice_activity_by_declaration(tmp_path):
    pipe = onnxpipe.load(build(tmp_path))
    assert pipe.kind == "voice-activity"
    with pytest.raises(Exception, match='loop is "streaming"'):
        pipe.run()
