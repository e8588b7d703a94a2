"""state.cross_kv: a merged decoder's cross-attention keys/values, made on its first step and
fed back unchanged (the tokens are checked in tests/py/models/test_tjs_whisper.py); here the
load-time errors, on the tjs_whisper folder's translation written out as pipeline.json."""

from __future__ import annotations

import json
import shutil

import pytest

import onnxpipe
from onnxpipe.config import transformers_js
from onnxpipe.errors import ConfigError
from tests.fixtures import tiny_models


def bundle_with(tmp_path, cross_kv):
    source = tiny_models.ensure("tjs_whisper")
    out = tmp_path / "whisper"
    shutil.copytree(source / "onnx", out / "onnx")
    doc = transformers_js.translate(str(source), "fp32")
    doc["pipeline"]["state"]["cross_kv"] = cross_kv
    (out / "pipeline.json").write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("cross_kv,path,words", [
    ({"past_pattern": "past_key_values.{layer}.encoder.key", "present_pattern": "present.{layer}.encoder.{kv}"},
     "$.pipeline.state.cross_kv.past_pattern", 'one "{layer}" and one "{kv}"'),
    ({"past_pattern": "past.{layer}.cross.{kv}", "present_pattern": "present.{layer}.encoder.{kv}"},
     "$.pipeline.state.cross_kv.past_pattern", 'no step-phase session has an input matching "past.{layer}.cross.{kv}"'),
    ({"past_pattern": "past_key_values.{layer}.encoder.{kv}", "present_pattern": "present.{layer}.cross.{kv}"},
     "$.pipeline.state.cross_kv.present_pattern", 'has input "past_key_values.0.encoder.key" but no output '
                                                  '"present.0.cross.key"'),
])
def test_load_errors_name_the_key(tmp_path, cross_kv, path, words):
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(str(bundle_with(tmp_path, cross_kv)))
    assert info.value.path == path
    assert words in info.value.detail
    assert info.value.file.endswith("pipeline.json")
