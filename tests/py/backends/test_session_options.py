"""pipeline.json session_options: natively set on onnxruntime's SessionOptions (enum values by
name), in the browser translated to onnxruntime-web's names; a key or value either side cannot
honour is refused at load with the JSON path, never dropped."""

from __future__ import annotations

import json
import shutil

import onnxruntime as ort
import pytest

import onnxpipe
from onnxpipe.backends.native import NativeBackend
from onnxpipe.backends.web_options import web_session_options
from onnxpipe.errors import ConfigError

WHERE = "sessions.decoder.session_options"


def test_web_names_and_values():
    got = web_session_options({"graph_optimization_level": "ORT_ENABLE_BASIC", "execution_mode": "ORT_SEQUENTIAL",
                               "enable_mem_pattern": False, "log_severity_level": 3,
                               "session.intra_op.allow_spinning": 0}, WHERE)
    assert got == {"graphOptimizationLevel": "basic", "executionMode": "sequential", "enableMemPattern": False,
                   "logSeverityLevel": 3, "extra": {"session.intra_op.allow_spinning": "0"}}


@pytest.mark.parametrize("options, message", [
    ({"intra_op_num_threads": 2}, "not supported in the browser: .*thread pool"),
    ({"optimized_model_filepath": "x.onnx"}, "no file system"),
    ({"enable_mem_patern": True}, "not a session option onnxruntime-web supports"),
    ({"provider_options": []}, "not a session option onnxruntime-web supports"),
    ({"graph_optimization_level": "all"}, "expected one of ORT_DISABLE_ALL"),
    ({"log_severity_level": True}, "expected int"),
])
def test_web_refusals_name_the_key(options, message):
    with pytest.raises(ConfigError, match=message) as info:
        web_session_options(options, WHERE)
    assert info.value.path == f"{WHERE}.{next(iter(options))}"


def test_every_web_name_is_a_native_option_too():
    """The browser takes a subset of what native runs accept, under the same names."""
    from onnxpipe.backends import web_options
    native = ort.SessionOptions()
    assert all(hasattr(native, key) for key in [*web_options._NAMES, *web_options._NO_EFFECT])


def test_native_enum_names_are_applied():
    so = NativeBackend().session_options({"graph_optimization_level": "ORT_ENABLE_BASIC",
                                          "execution_mode": "ORT_PARALLEL"}, WHERE)
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert so.execution_mode == ort.ExecutionMode.ORT_PARALLEL


@pytest.mark.parametrize("options, message", [
    ({"execution_mode": "parallel"}, "expected one of ORT_PARALLEL, ORT_SEQUENTIAL"),
    ({"intra_op_num_threads": "two"}, "expected a value of the type"),
    ({"provider_options": []}, 'unknown session option "provider_options"'),
])
def test_native_refusals_at_load_name_file_and_path(tmp_path, tiny_bundles, options, message):
    bundle = tmp_path / "b"
    shutil.copytree(tiny_bundles["torch_llama"], bundle)
    doc = json.loads((bundle / "pipeline.json").read_text())
    doc["pipeline"]["sessions"]["decoder"]["session_options"] = options
    (bundle / "pipeline.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=message) as info:
        onnxpipe.load(bundle)
    assert info.value.path == f"$.pipeline.{WHERE}.{next(iter(options))}"
    assert info.value.file.endswith("pipeline.json")
