"""export_folder: an onnx-community style folder from an in-memory model, read back by the
runtime's translator and checked against transformers on the spot."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from onnxpipe.config import transformers_js as tjs  # noqa: E402
from onnxpipe.export.transformers_js import CACHE_BRANCH, export_folder, io_names  # noqa: E402
from tests.fixtures.hf_decoders import PROMPT, _random_model, _tokenizer  # noqa: E402
from tests.fixtures.tjs_folders import ort_greedy  # noqa: E402

SPEC = dict(arch="llama", seed=5, vocab_size=448, num_hidden_layers=2)


def _reference(model, steps):
    import torch

    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=steps, do_sample=False, pad_token_id=0)
    return out[0, len(PROMPT):].tolist()


def test_merged_with_external_data(tmp_path):
    import onnx

    model = _random_model(SPEC)
    written = export_folder(model, _tokenizer(SPEC["vocab_size"], 3), tmp_path, dtypes=("fp32",), merged=True,
                            external_data=True)
    assert written == {"fp32": str(tmp_path / "onnx" / "decoder_model_merged.onnx")}
    assert (tmp_path / "onnx" / "decoder_model_merged.onnx_data").is_file()
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / name).is_file(), name
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "llama"
    graph = onnx.load(written["fp32"], load_external_data=False).graph
    inputs, outputs = io_names(SPEC["num_hidden_layers"])
    assert [i.name for i in graph.input] == inputs + [CACHE_BRANCH]
    assert [o.name for o in graph.output] == outputs
    assert [n.op_type for n in graph.node] == ["If"]
    # one copy of each weight, shared by both branches
    params = sum(p.numel() for p in model.parameters())
    stored = sum(int(np.prod(i.dims)) for i in graph.initializer)
    assert stored < 1.5 * params
    assert tjs.translate(str(tmp_path), "fp32")["pipeline"]["sessions"]["decoder"] == {
        "file": "onnx/decoder_model_merged.onnx", "external_data": ["onnx/decoder_model_merged.onnx_data"]}
    tokens, _ = ort_greedy(tmp_path / "onnx" / "decoder_model_merged.onnx", PROMPT, steps=16)
    assert tokens == _reference(model, 16)   # the fixture seed is decisive at every step


def test_unknown_dtype_is_refused(tmp_path):
    with pytest.raises(ValueError, match="bnb4"):
        export_folder(object(), None, tmp_path, dtypes=("fp32", "bnb4"))
