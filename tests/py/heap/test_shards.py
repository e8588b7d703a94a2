"""A decoder as consecutive parts, one heap each (heap/shards.py): the parts run one after the
other compute what the whole graph does, logits and KV cache, step after step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from onnxpipe.heap.native import write_plan
from onnxpipe.heap.plan import plan_file, plan_parts
from onnxpipe.onnx_info import FileSource
from tests.fixtures import tiny_models


@pytest.fixture(scope="module")
def sized_small() -> Path:
    return tiny_models.ensure("sized_qwen_small")


def parts_of(path: Path, n: int, expand: str = "all"):
    source = FileSource(str(path))
    try:
        return plan_parts(source, path.name, n, expand)
    finally:
        source.close()


class Parts:
    """The parts as native sessions, run in order: each takes the caller's feeds and what the
    parts before it handed on."""

    def __init__(self, plans, bundle: Path, tmp: Path):
        self.plans = plans
        self.sessions = [ort.InferenceSession(write_plan(p, str(bundle), str(tmp / f"part{k}"), "part.onnx"),
                                              providers=["CPUExecutionProvider"]) for k, p in enumerate(plans)]

    def run(self, feeds: dict) -> dict:
        values = dict(feeds)
        for plan, sess in zip(self.plans, self.sessions):
            names = [o.name for o in sess.get_outputs()]
            got = sess.run(names, {i.name: values[i.name] for i in sess.get_inputs()})
            values.update(zip(names, got))
        return values


def decode(run, inputs, steps: int = 4) -> list[np.ndarray]:
    """Greedy steps of a transformers.js decoder through ``run(feeds) -> outputs``: the logits."""
    past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in inputs
            if i.name.startswith("past_key_values.")}
    ids, total, out = [414, 3493, 3399, 1047, 3166], 0, []
    for _ in range(steps):
        feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, total + len(ids)), np.int64),
                 "position_ids": np.arange(total, total + len(ids), dtype=np.int64)[None], **past}
        res = run(feeds)
        out.append(res["logits"][0, -1])
        past = {k: res[k.replace("past_key_values.", "present.")] for k in past}
        total += len(ids)
        ids = [int(out[-1].argmax())]
    return out


@pytest.mark.parametrize("dtype,expand", [("q4", "all"), ("fp32", "none")])
def test_two_parts_compute_what_the_whole_graph_does(tmp_path, sized_small, dtype, expand):
    src = sized_small / "onnx" / ("model_q4.onnx" if dtype == "q4" else "model.onnx")
    plans = parts_of(src, 2, expand)
    assert not isinstance(plans, str), plans
    whole_plan = plan_file(FileSource(str(src)), src.name, expand)
    whole = ort.InferenceSession(write_plan(whole_plan, str(src.parent), str(tmp_path / "whole"), "whole.onnx"),
                                 providers=["CPUExecutionProvider"])
    parts = Parts(plans, src.parent, tmp_path)
    # each part holds its own layers' weights and KV cache; the first hands the second a few values
    present = [{o.name for o in s.get_outputs() if o.name.startswith("present.")} for s in parts.sessions]
    assert present[0] == {"present.0.key", "present.0.value"} and present[1] == {"present.1.key", "present.1.value"}
    assert "logits" in {o.name for o in parts.sessions[1].get_outputs()}
    handed = set(plans[1].part.inputs) - {i.name for i in whole.get_inputs()}
    assert 1 <= len(handed) <= 16, handed   # the hidden state(s), and shapes, mask and rotary values made once
    assert sum(p.weight_bytes for p in plans) <= whole_plan.weight_bytes * 1.01
    names = [o.name for o in whole.get_outputs()]
    want = decode(lambda f: dict(zip(names, whole.run(names, f))), whole.get_inputs())
    got = decode(parts.run, whole.get_inputs())
    for a, b in zip(got, want):
        assert np.abs(a - b).max() <= 1e-5 * max(1.0, np.abs(b).max())


def test_three_parts_of_two_layers_is_refused(sized_small):
    reason = parts_of(sized_small / "onnx" / "model_q4.onnx", 3)
    assert isinstance(reason, str) and "fewer layers than parts" in reason


def test_a_merged_decoder_is_not_split():
    folder = tiny_models.ensure("tjs_qwen3_merged")
    reason = parts_of(folder / "onnx" / "decoder_model_merged_q4.onnx", 2)
    assert reason == "its nodes hold subgraphs (a merged decoder's If)"
