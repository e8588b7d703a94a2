"""The plugin escape hatch: a Python file in the bundle, loaded at open, hooked before runs.

Uses the single-pass voice of test_controls (out = ids * scales[1] + scales[0]).
"""

from __future__ import annotations

import json

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError
from tests.py.engine.test_controls import build, run

PLUGIN = '''
class Doubler:
    reads = ["voice.out"]

    def __init__(self, context):
        self.context = context
        self.calls = []

    def before_run(self, call):
        self.calls.append((call.session, call.phase, sorted(call.feeds), sorted(call.inputs)))
        ids = call.feeds["ids"]
        # the ids twice along the sequence axis, made in the engine
        call.feeds["ids"] = self.context.concat([ids, ids], axis=1, dtype="int64")


def create(context):
    return Doubler(context)
'''


def with_plugin(tmp_path, source=PLUGIN, entry_point=None):
    build(tmp_path)
    (tmp_path / "glue.py").write_text(source)
    doc = json.loads((tmp_path / "pipeline.json").read_text())
    doc["pipeline"]["plugin"] = {"module": "glue.py", **({"entry_point": entry_point} if entry_point else {})}
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))


def test_the_plugin_sees_each_run_and_may_replace_feeds(tmp_path):
    with_plugin(tmp_path)
    pipe = onnxpipe.load(tmp_path)
    assert pipe.structure == "plugin"
    assert run(pipe, gain=1, offset=0) == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    plugin = pipe.executor.plugin
    assert plugin.calls == [("voice", "init", ["ids", "scales"], ["gain", "offset", "phoneme_ids", "scales"])]
    assert plugin.context.output("voice", "out") is not None   # kept because it reads it
    assert run(pipe) == [2.5, 4.5, 6.5, 2.5, 4.5, 6.5]         # and again: nothing left over


@pytest.mark.parametrize("source, entry, path, words", [
    ("def create(:\n", None, "$.pipeline.plugin", ['plugin "glue.py" failed to import: SyntaxError']),
    ("import not_a_module_anywhere\n", None, "$.pipeline.plugin",
     ["failed to import: ModuleNotFoundError", "not_a_module_anywhere"]),
    ("def make(context):\n    return None\n", None, "$.pipeline.plugin.entry_point",
     ['has no function "create"', "it defines: make"]),
    ("def create(context):\n    return None\n", "build", "$.pipeline.plugin.entry_point",
     ['has no function "build"']),
    ("class P:\n    reads = ['voice.nope']\ndef create(context):\n    return P()\n", None, "$.pipeline.plugin",
     ['plugin reads "voice.nope" but session "voice" has no output "nope"', "available outputs: out"]),
])
def test_a_broken_plugin_is_a_config_error_at_load(tmp_path, source, entry, path, words):
    with_plugin(tmp_path, source, entry)
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(tmp_path)
    assert info.value.path == path, info.value.message
    for word in words:
        assert word in info.value.message


def test_a_plugin_outside_the_bundle_is_refused(tmp_path):
    build(tmp_path)
    doc = json.loads((tmp_path / "pipeline.json").read_text())
    doc["pipeline"]["plugin"] = {"module": "../elsewhere.py"}
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(tmp_path)
    assert info.value.path == "$.pipeline.plugin.module"
