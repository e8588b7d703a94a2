"""``load_config`` on folders in tmp_path: errors that need the bundle on disk (invalid JSON,
missing folder / file, paths escaping the bundle), with the full file path in the message."""

import json

import pytest

from onnxpipe.config.load import load_config
from onnxpipe.errors import BundleError, ConfigError

GOOD = {"version": 2, "pipeline": {"extends": "autoregressive-decoder",
                                   "sessions": {"decoder": {"file": "model.onnx"}}}}


def bundle(tmp_path, config, files=("model.onnx",), text=None):
    folder = tmp_path / "bundle"
    folder.mkdir(exist_ok=True)
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"not read by load_config")
    (folder / "pipeline.json").write_text(text if text is not None else json.dumps(config), encoding="utf-8")
    return folder


def load_fails(folder, path, *parts) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(folder)
    exc = info.value
    pj = str(folder / "pipeline.json")
    assert exc.file == pj
    assert exc.path == path, exc.message
    assert exc.message.startswith(f"{pj}: " + (f"{path}: " if path else "")), exc.message
    for part in parts:
        assert part in exc.message, f"{part!r} not in {exc.message!r}"
    return exc


def with_pipeline(**fields):
    d = json.loads(json.dumps(GOOD))
    d["pipeline"].update(fields)
    return d


def test_good_bundle_loads(tmp_path):
    folder = bundle(tmp_path, GOOD)
    for target in (folder, folder / "pipeline.json", str(folder)):
        loaded = load_config(target)
        assert loaded.bundle_dir == str(folder)
        assert loaded.file == str(folder / "pipeline.json")


def test_invalid_json_gives_line_and_column(tmp_path):
    folder = bundle(tmp_path, None, text='{"version": 2,\n  "pipeline": {,}}\n')
    load_fails(folder, None, "invalid JSON at line 2, column 16")


def test_trailing_comma_invalid_json(tmp_path):
    folder = bundle(tmp_path, None, text='{\n "version": 2,\n}\n')
    load_fails(folder, None, "invalid JSON at line 3, column 1")


def test_missing_bundle_folder(tmp_path):
    with pytest.raises(BundleError) as info:
        load_config(tmp_path / "no_such_model")
    msg = info.value.message
    assert str(tmp_path / "no_such_model") in msg
    assert "no such model bundle (expected a folder with pipeline.json)" in msg
    assert info.value.kind == "bundle"


def test_folder_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError) as info:
        load_config(tmp_path / "empty")
    assert "no pipeline.json or genai_config.json in this folder" in info.value.message


def test_session_file_that_does_not_exist(tmp_path):
    folder = bundle(tmp_path, GOOD, files=())
    load_fails(folder, "$.pipeline.sessions.decoder.file",
               'file "model.onnx" does not exist in', str(folder))


def test_session_file_variant_that_does_not_exist(tmp_path):
    config = with_pipeline(sessions={"decoder": {"file": {"cpu": "model.onnx", "wasm": "model.int8.onnx"}}})
    folder = bundle(tmp_path, config)
    load_fails(folder, "$.pipeline.sessions.decoder.file.wasm", 'file "model.int8.onnx" does not exist')


def test_missing_optional_session_file_is_fine(tmp_path):
    config = with_pipeline(sessions={"decoder": {"file": "model.onnx"},
                                     "vision": {"file": "vision.onnx", "optional": True}})
    loaded = load_config(bundle(tmp_path, config))
    assert set(loaded.spec.pipeline.sessions) == {"decoder", "vision"}


def test_session_file_escaping_the_bundle(tmp_path):
    config = with_pipeline(sessions={"decoder": {"file": "../model.onnx"}})
    load_fails(bundle(tmp_path, config), "$.pipeline.sessions.decoder.file",
               'expected a path inside the bundle, found "../model.onnx"')


def test_session_file_not_a_string(tmp_path):
    config = with_pipeline(sessions={"decoder": {"file": 3}})
    load_fails(bundle(tmp_path, config), "$.pipeline.sessions.decoder.file", "expected a file name, found 3")


@pytest.mark.parametrize("module", ["../evil.py", "sub/../../evil.py", "/etc/evil.py",
                                    "https://example.com/evil.py"])
def test_plugin_path_escaping_the_bundle(tmp_path, module):
    load_fails(bundle(tmp_path, with_pipeline(plugin={"module": module})), "$.pipeline.plugin.module",
               f'expected a relative path inside the bundle, found "{module}"')


def test_plugin_file_missing(tmp_path):
    load_fails(bundle(tmp_path, with_pipeline(plugin={"module": "plugin.py"})), "$.pipeline.plugin.module",
               'plugin file "plugin.py" does not exist')


def test_plugin_inside_the_bundle_is_accepted(tmp_path):
    folder = bundle(tmp_path, with_pipeline(plugin={"module": "code/plugin.py"}),
                    files=("model.onnx", "code/plugin.py"))
    assert load_config(folder).spec.pipeline.plugin.entry_point == "create"


def test_schema_errors_name_the_full_file_path(tmp_path):
    config = json.loads(json.dumps(GOOD))
    config["generation"] = {"sampling": {"temprature": 0.5}}
    load_fails(bundle(tmp_path, config), "$.generation.sampling.temprature", 'Did you mean "temperature"?')


def test_genai_bundle_errors_name_genai_config(tmp_path):
    folder = tmp_path / "v1"
    folder.mkdir()
    (folder / "genai_config.json").write_text(json.dumps({"model": {"decoder": {"filename": "model.onnx"},
                                                                   "vision": {"filename": "v.onnx"}}}))
    with pytest.raises(ConfigError) as info:
        load_config(folder)
    assert info.value.file == str(folder / "genai_config.json")
    assert info.value.path == "$.model.vision"
    assert "no model.type: images (a model.vision section)" in info.value.message


def test_genai_bundle_missing_model_file(tmp_path):
    folder = tmp_path / "v1"
    folder.mkdir()
    (folder / "genai_config.json").write_text(json.dumps({"model": {"decoder": {"filename": "model.onnx"}}}))
    with pytest.raises(ConfigError) as info:
        load_config(folder)
    assert info.value.file == str(folder / "genai_config.json")
    assert 'file "model.onnx" does not exist' in info.value.message


def test_pipeline_json_wins_over_genai_config(tmp_path):
    folder = bundle(tmp_path, GOOD)
    (folder / "genai_config.json").write_text("{not json")
    assert load_config(folder).file.endswith("pipeline.json")


def test_a_session_run_only_by_optional_steps_may_be_missing(tmp_path):
    config = with_pipeline(sessions={"decoder": {"file": "model.onnx"}, "vision": {"file": "vision.onnx"}},
                           flow=[{"run": "vision", "when": "init", "optional": True},
                                 {"run": "decoder", "when": "step"}])
    assert set(load_config(bundle(tmp_path, config)).spec.pipeline.sessions) == {"decoder", "vision"}


def test_a_required_step_needs_its_file_even_when_another_step_is_optional(tmp_path):
    config = with_pipeline(sessions={"decoder": {"file": "model.onnx"}, "vision": {"file": "vision.onnx"}},
                           flow=[{"run": "vision", "when": "init", "optional": True},
                                 {"run": "vision", "when": "final"},
                                 {"run": "decoder", "when": "step"}])
    load_fails(bundle(tmp_path, config), "$.pipeline.sessions.vision.file", 'file "vision.onnx" does not exist')
