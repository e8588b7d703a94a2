"""A flow step marked ``optional`` is skipped when its session's file is missing; the pipeline
runs as without it (here: the same greedy tokens as the bundle without that step)."""

from __future__ import annotations

import json
import shutil

import onnxpipe


def test_an_optional_step_with_a_missing_session_is_skipped(tmp_path, tiny_bundles):
    bundle = tmp_path / "b"
    shutil.copytree(tiny_bundles["torch_llama"], bundle)
    plain = onnxpipe.load(bundle).generate(input_ids=[5, 6, 7], max_new_tokens=6, do_sample=False).tokens
    doc = json.loads((bundle / "pipeline.json").read_text())
    doc["pipeline"]["sessions"]["vision"] = {"file": "vision.onnx"}
    doc["pipeline"]["flow"] = [{"run": "vision", "when": "init", "optional": True},
                               {"run": "decoder", "when": "step"}]
    (bundle / "pipeline.json").write_text(json.dumps(doc))
    pipe = onnxpipe.load(bundle)
    assert "vision" not in pipe.sessions
    assert pipe.generate(input_ids=[5, 6, 7], max_new_tokens=6, do_sample=False).tokens == plain
