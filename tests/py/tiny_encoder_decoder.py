"""A tiny encoder-decoder for the cross-cache and transcription-config tests (onnx.helper).

The encoder doubles ``features`` [1, V] into ``cross_bias``; the decoder's logits are a bigram
(next id = id + 1) plus ``cross_bias``, and it keeps a one-value-per-position self KV cache.
With a large bias on one id, greedy decoding picks that id every step.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

V = 8


def _model(nodes, name, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def make_encoder(out="cross_bias"):
    two = numpy_helper.from_array(np.array([2.0], np.float32), "two")
    return _model([helper.make_node("Mul", ["features", "two"], [out])], "enc",
                  [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, V])],
                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, V])], [two])


def make_decoder(cross="cross_bias", past="past_key_values.0.key", present="present.0.key"):
    shift = np.zeros((V, V), np.float32)
    for t in range(V):
        shift[t, (t + 1) % V] = 1.0
    inits = [numpy_helper.from_array(np.eye(V, dtype=np.float32), "embed"),
             numpy_helper.from_array(shift, "head"),
             numpy_helper.from_array(np.array([1, 1, -1, 1], np.int64), "kv_shape")]
    nodes = [helper.make_node("Gather", ["embed", "input_ids"], ["hidden"], axis=0),
             helper.make_node("MatMul", ["hidden", "head"], ["bigram"]),
             helper.make_node("Add", ["bigram", cross], ["logits"]),
             helper.make_node("Cast", ["input_ids"], ["ids_f"], to=TensorProto.FLOAT),
             helper.make_node("Reshape", ["ids_f", "kv_shape"], ["new_kv"]),
             helper.make_node("Concat", [past, "new_kv"], [present], axis=2)]
    return _model(nodes, "dec",
                  [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "s"]),
                   helper.make_tensor_value_info(past, TensorProto.FLOAT, [1, 1, "p", 1]),
                   helper.make_tensor_value_info(cross, TensorProto.FLOAT, [1, V])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "s", V]),
                   helper.make_tensor_value_info(present, TensorProto.FLOAT, [1, 1, "t", 1])], inits)


def bundle(tmp_path, doc_changes=None, encoder=None, decoder=None):
    onnx.save(encoder or make_encoder(), tmp_path / "encoder.onnx")
    onnx.save(decoder or make_decoder(), tmp_path / "decoder.onnx")
    doc = {"version": 2,
           "pipeline": {"sessions": {"encoder": {"file": "encoder.onnx"}, "decoder": {"file": "decoder.onnx"}},
                        "flow": [{"run": "encoder", "when": "init"},
                                 {"run": "decoder", "when": "step", "cross_attention_from": "encoder"}],
                        "dataflow": [{"from": "inputs.features", "to": "encoder.features"}],
                        "state": {"cross_cache": {"source": "encoder"}}},
           "tokens": {"eos": V - 1, "decoder_prefix": [0]},
           "generation": {"loop": "autoregressive", "max_length": 16}}
    for path, value in (doc_changes or {}).items():
        node = doc
        *head, last = path.split(".")
        for key in head:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))
    return tmp_path


def features(hot: int):
    values = [0.0] * V
    values[hot] = 50.0
    return {"features": (values, (1, V))}
