"""Tiny ONNX graphs and bundles for the validation / bad-input tests, built with onnx.helper.

Everything is written under a caller-given folder (pytest's ``tmp_path``); nothing binary is
committed. The decoder is a "next id" bigram model: Gather from an identity embedding, then a
MatMul with a shift matrix, so greedy decoding after token ``t`` is always ``(t + 1) % vocab``.
That makes generated tokens exact and easy to assert.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
VOCAB = 16


def _finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="onnxpipe-tests")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def _shift(vocab: int) -> np.ndarray:
    """[vocab, vocab] matrix whose row t is one-hot at (t + 1) % vocab."""
    m = np.zeros((vocab, vocab), dtype=np.float32)
    for t in range(vocab):
        m[t, (t + 1) % vocab] = 1.0
    return m


def decoder_model(vocab: int = VOCAB, input_name: str = "input_ids", output_name: str = "logits",
                  extra_inputs: tuple[str, ...] = ()) -> onnx.ModelProto:
    """input_ids [1, S] int64 -> logits [1, S, V] float32 (greedy next id = id + 1 mod V).

    ``extra_inputs`` adds float [1] inputs that are added to the logits (so onnxruntime keeps
    them as real graph inputs), for "fed by nothing" tests.
    """
    embed = numpy_helper.from_array(np.eye(vocab, dtype=np.float32), "embed")
    head = numpy_helper.from_array(_shift(vocab), "head")
    nodes = [
        helper.make_node("Gather", ["embed", input_name], ["hidden"], axis=0),
        helper.make_node("MatMul", ["hidden", "head"], ["raw" if extra_inputs else output_name]),
    ]
    inputs = [helper.make_tensor_value_info(input_name, TensorProto.INT64, [1, "seq"])]
    last = "raw"
    for i, name in enumerate(extra_inputs):
        out = output_name if i == len(extra_inputs) - 1 else f"acc{i}"
        nodes.append(helper.make_node("Add", [last, name], [out]))
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]))
        last = out
    graph = helper.make_graph(
        nodes, "tiny_decoder", inputs,
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, "seq", vocab])],
        initializer=[embed, head])
    return _finish(graph)


def embed_model(vocab: int = VOCAB) -> onnx.ModelProto:
    """input_ids [1, S] int64 -> inputs_embeds [1, S, V] (identity embedding)."""
    embed = numpy_helper.from_array(np.eye(vocab, dtype=np.float32), "embed")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["embed", "input_ids"], ["inputs_embeds"], axis=0)],
        "tiny_embed",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, [1, "seq", vocab])],
        initializer=[embed])
    return _finish(graph)


def head_model(vocab: int = VOCAB) -> onnx.ModelProto:
    """inputs_embeds [1, S, V] -> logits [1, S, V] (the shift matrix)."""
    head = numpy_helper.from_array(_shift(vocab), "head")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["inputs_embeds", "head"], ["logits"])],
        "tiny_head",
        [helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, [1, "seq", vocab])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", vocab])],
        initializer=[head])
    return _finish(graph)


def save(model: onnx.ModelProto, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def save_graph(graph: onnx.GraphProto, path: Path) -> Path:
    """A checked model (opset 17, IR 8) around ``graph``, saved to ``path``."""
    return save(_finish(graph), path)


def write_json(path: Path, data) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def decoder_config(max_length: int = 32, **pipeline) -> dict:
    """A pipeline.json for the single-session decoder bundle (no tokenizer)."""
    pipe = {"extends": "autoregressive-decoder", "sessions": {"decoder": {"file": "model.onnx"}}}
    pipe.update(pipeline)
    return {"version": 2, "pipeline": pipe, "generation": {"max_length": max_length}}


def decoder_bundle(folder: Path, config: dict | None = None, **model_kwargs) -> Path:
    """A folder with model.onnx (the tiny decoder) and pipeline.json."""
    folder = Path(folder)
    save(decoder_model(**model_kwargs), folder / "model.onnx")
    write_json(folder / "pipeline.json", config if config is not None else decoder_config())
    return folder


def two_session_config(max_length: int = 32, **pipeline) -> dict:
    """embed (input_ids -> inputs_embeds) then head (inputs_embeds -> logits), matched by name."""
    pipe = {
        "sessions": {"embed": {"file": "embed.onnx"}, "head": {"file": "head.onnx"}},
        "flow": [{"run": "embed", "when": "step"}, {"run": "head", "when": "step"}],
    }
    pipe.update(pipeline)
    return {"version": 2, "pipeline": pipe,
            "generation": {"loop": "autoregressive", "max_length": max_length}}


def two_session_bundle(folder: Path, config: dict | None = None) -> Path:
    folder = Path(folder)
    save(embed_model(), folder / "embed.onnx")
    save(head_model(), folder / "head.onnx")
    write_json(folder / "pipeline.json", config if config is not None else two_session_config())
    return folder


def expected_greedy(prompt: list[int], n: int, vocab: int = VOCAB) -> list[int]:
    """What the tiny decoder generates greedily after ``prompt``."""
    out, last = [], prompt[-1]
    for _ in range(n):
        last = (last + 1) % vocab
        out.append(last)
    return out
