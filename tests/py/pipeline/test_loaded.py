"""LoadedPipeline answers from the graph what the session's I/O leaves symbolic."""

from __future__ import annotations

import json
import os
import shutil

import pytest

import onnxpipe
from onnxpipe.backends.base import TensorInfo
from onnxpipe.errors import InputError
from tests.fixtures import tiny_models
from tests.py.onnx_info.test_detect import strip_declared_shapes


def test_a_symbolic_logits_width_is_read_from_the_graph(tmp_path):
    source = tiny_models.ensure("genai_llama")
    vocab = json.loads((source / "genai_config.json").read_text())["model"]["vocab_size"]
    strip_declared_shapes(source / "model.onnx", tmp_path / "model.onnx")
    shutil.copy(source / "model.onnx.data", tmp_path)   # onnxruntime refuses data linked from elsewhere
    for name in ("tokenizer.json", "tokenizer_config.json", "genai_config.json"):
        os.symlink(source / name, tmp_path / name)
    pipe = onnxpipe.load(tmp_path)
    session, name = pipe.executor.plan.pipeline_outputs["logits"]
    # onnxruntime infers the width natively; onnxruntime-web reports the file's declared
    # shape, which this stripped graph leaves symbolic: make the session say what it says there
    outputs = pipe.sessions[session].outputs
    outputs[name] = TensorInfo(name, outputs[name].dtype, ("batch", "seq", "d2"))
    assert pipe.loaded.vocab_size == vocab
    with pytest.raises(InputError, match=rf"outside the vocabulary \(0\.\.{vocab - 1}\)"):
        pipe.generate(input_ids=[1, vocab])
