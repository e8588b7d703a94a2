"""``loop: per_image`` with ``dynamic_shape``: one vision run per image, cropped to its size.

vision (init): pixel_values [N, C, H, W] -> image_features [N, C] = sum over each image's
own H x W (the padding holds junk, so cropping matters); decoder (step): logits =
(sum E[input_ids] + sum of image features) W.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnx_builders as ob
import onnxpipe
from tests.agreement import FP32_KERNELS, assert_greedy_agrees, margins
from onnxpipe.errors import InputError

C, V = 4, 19


def build(tmp_path):
    rng = np.random.default_rng(2)
    E = rng.normal(size=(V, C)).astype(np.float32)
    W = (rng.normal(size=(C, V)) * 3).astype(np.float32)
    vi = helper.make_tensor_value_info
    vision = helper.make_graph(
        [helper.make_node("ReduceSum", ["pixel_values", "axes23"], ["image_features"], keepdims=0)], "vision",
        [vi("pixel_values", TensorProto.FLOAT, ["n", C, "h", "w"])], [vi("image_features", TensorProto.FLOAT, ["n", C])],
        [numpy_helper.from_array(np.array([2, 3], np.int64), "axes23")])
    decoder = helper.make_graph(
        [helper.make_node("Gather", ["E", "input_ids"], ["g"]),
         helper.make_node("ReduceSum", ["g", "axes1"], ["t"], keepdims=0),
         helper.make_node("ReduceSum", ["image_features", "axes0"], ["f"], keepdims=1),
         helper.make_node("Add", ["t", "f"], ["h"]), helper.make_node("MatMul", ["h", "W"], ["logits"])], "decoder",
        [vi("input_ids", TensorProto.INT64, [1, "s"]), vi("image_features", TensorProto.FLOAT, ["n", C])],
        [vi("logits", TensorProto.FLOAT, [1, V])],
        [numpy_helper.from_array(a, n) for n, a in (("E", E), ("W", W), ("axes1", np.array([1], np.int64)),
                                                    ("axes0", np.array([0], np.int64)))])
    for name, graph in (("vision", vision), ("decoder", decoder)):
        ob.save_graph(graph, tmp_path / f"{name}.onnx")
    (tmp_path / "pipeline.json").write_text(json.dumps({
        "version": 2,
        "pipeline": {
            "extends": "vision-language",
            "sessions": {"vision": {"file": "vision.onnx"}, "decoder": {"file": "decoder.onnx"}},
            "flow": [{"run": "vision", "when": "init", "loop": "per_image", "loop_over": "pixel_values",
                      "dynamic_shape": {"source": "image_sizes", "apply_to_dims": [2, 3]}},
                     {"run": "decoder", "when": "step"}],
            "dataflow": [{"from": "inputs.pixel_values", "to": "vision.pixel_values"}],
        },
        "generation": {"max_length": 64}}))

    def reference(ids, pixels, sizes, n):
        feats = sum(pixels[i, :, :h, :w].sum(axis=(1, 2)) for i, (h, w) in enumerate(sizes))
        out, feed, scores = [], ids, []
        for _ in range(n):
            scores.append((E[feed].sum(0) + feats) @ W)
            token = int(np.argmax(scores[-1]))
            out.append(token)
            feed = [token]
        return out, margins(scores)

    return reference


def test_each_image_runs_alone_cropped_to_its_size(tmp_path):
    reference = build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    pixels = np.random.default_rng(3).normal(size=(3, C, 5, 6)).astype(np.float32)
    sizes = np.array([[5, 6], [2, 3], [4, 1]], np.int64)
    ids = [1, 2, 3]
    want, want_margins = reference(ids, pixels, sizes, 8)
    assert want != reference(ids, pixels, [[5, 6]] * 3, 8)[0]   # the crop changes the answer
    result = pipe.generate(input_ids=ids, max_new_tokens=8, inputs={"pixel_values": pixels, "image_sizes": sizes})
    assert_greedy_agrees(result.tokens, want, want_margins, FP32_KERNELS)


def test_missing_sizes_are_asked_for(tmp_path):
    build(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    pixels = np.zeros((1, C, 2, 2), np.float32)
    with pytest.raises(InputError, match="needs input"):
        pipe.generate(input_ids=[1], inputs={"pixel_values": pixels})
