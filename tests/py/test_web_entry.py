"""Python's one entry for the runtime worker (onnxpipe.web_entry.call): its verb table agrees
with the worker's (workers/python-entry.ts PythonVerbs), and unknown verbs and arguments are
input errors naming them. The JS modules it imports are stood in for (it runs in Pyodide)."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from unittest import mock

import pytest

PYTHON_ENTRY_TS = Path(__file__).resolve().parents[2] / "workers" / "python-entry.ts"


@pytest.fixture()
def web_entry(monkeypatch):
    for name in ("js", "ort", "onnxpipe_js", "pyodide", "pyodide.ffi"):
        monkeypatch.setitem(sys.modules, name, mock.MagicMock())
    for name in [m for m in sys.modules if m in ("onnxpipe.web_entry", "onnxpipe.backends.web", "onnxpipe.text.web",
                                                  "onnxpipe.phonemes.web")]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("onnxpipe.web_entry")
    yield module
    for name in ("onnxpipe.web_entry", "onnxpipe.backends.web", "onnxpipe.text.web", "onnxpipe.phonemes.web"):
        sys.modules.pop(name, None)


def test_the_verb_table_is_the_one_the_worker_calls(web_entry):
    source = PYTHON_ENTRY_TS.read_text(encoding="utf-8")
    body = re.search(r"export interface PythonVerbs \{(.*?)\n\}", source, re.S).group(1)
    assert sorted(re.findall(r"^\s+(\w+):", body, re.M)) == sorted(web_entry.VERBS)


def test_unknown_verbs_and_arguments_are_input_errors_naming_them(web_entry):
    def error(verb, args):
        return json.loads(web_entry.call(verb, json.dumps(args)))["error"]

    assert error("detectSpeech", {}) == {"kind": "input", "message": 'unknown verb "detectSpeech"; the Python entry takes '
                                         + ", ".join(sorted(web_entry.VERBS))}
    assert error("generate", {"inputIds": [1]}) == {
        "kind": "input", "message": 'generate: unknown argument "inputIds"; it takes input_ids, messages, options, prompt'}
    assert error("transcribe", {"sampleRate": 16000})["message"].startswith('transcribe: unknown argument "sampleRate"')
    assert error("generate", [1]) == {"kind": "input", "message": "generate: args must be an object, found list"}
    assert error("generate", {"input_ids": [1]}) == {"kind": "input", "message": "no bundle is loaded: send a load request first"}
    assert json.loads(web_entry.call("dispose", "{}")) == {"result": None}
