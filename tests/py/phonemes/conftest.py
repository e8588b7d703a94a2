"""Fixtures for the phonemizer tests: the browser package's espeak-ng data (extracted once
into tests/fixtures/.cache/ by tools/extract_espeak_data.mjs), a bundle holding Piper's id
map, and the browser package itself running in Node (espeak_node.mjs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from onnxpipe.config.schema import PhonemesPreprocessing

ROOT = Path(__file__).resolve().parents[3]
NPM_DATA = ROOT / "tests" / "fixtures" / ".cache" / "espeak-ng-data-npm"
NODE_SCRIPT = Path(__file__).with_name("espeak_node.mjs")
MAP_FILE = "voice.onnx.json"

# Piper's phoneme -> id map for espeak voices (the joe voice's 151 entries): symbol i has id [i]
PIPER_SYMBOLS = (
    "_^$ !'(),-.:;?abcdefhijklmnopqrstuvwxyz\xe6\xe7\xf0\xf8\u0127\u014b\u0153\u01c0\u01c1\u01c2\u01c3"
    "\u0250\u0251\u0252\u0253\u0254\u0255\u0256\u0257\u0258\u0259\u025a\u025b\u025c\u025e\u025f\u0260"
    "\u0261\u0262\u0263\u0264\u0265\u0266\u0267\u0268\u026a\u026b\u026c\u026d\u026e\u026f\u0270\u0271"
    "\u0272\u0273\u0274\u0275\u0276\u0278\u0279\u027a\u027b\u027d\u027e\u0280\u0281\u0282\u0283\u0284"
    "\u0288\u0289\u028a\u028b\u028c\u028d\u028e\u028f\u0290\u0291\u0292\u0294\u0295\u0298\u0299\u029b"
    "\u029c\u029d\u029f\u02a1\u02a2\u02b2\u02c8\u02cc\u02d0\u02d1\u02de\u03b2\u03b8\u03c7\u1d7b\u2c71"
    "0123456789\u0327\u0303\u032a\u032f\u0329\u02b0\u02e4\u03b5\u2193#\""
)
PIPER_MAP = {symbol: [i] for i, symbol in enumerate(PIPER_SYMBOLS)}


def need(program: str) -> None:
    if shutil.which(program) is None:
        pytest.fail(f"{program} is not installed (make setup installs it)")


@pytest.fixture(scope="session")
def npm_data() -> Path:
    """OUTDIR holding the browser package's espeak-ng-data (give it to espeak-ng --path)."""
    need("node")
    subprocess.run(["node", str(ROOT / "tools" / "extract_espeak_data.mjs"), str(NPM_DATA)],
                   check=True, capture_output=True)
    assert (NPM_DATA / "espeak-ng-data" / "phontab").is_file()
    return NPM_DATA


@pytest.fixture
def piper_map() -> dict[str, list[int]]:
    return {k: list(v) for k, v in PIPER_MAP.items()}


@pytest.fixture(scope="module")
def piper_map_module() -> dict[str, list[int]]:
    return {k: list(v) for k, v in PIPER_MAP.items()}


@pytest.fixture(scope="session")
def make_spec():
    """PhonemesPreprocessing for the `bundle` fixture; keyword arguments override fields."""
    def make(**fields) -> PhonemesPreprocessing:
        return PhonemesPreprocessing(**{"voice": "en-us", "id_map": f"{MAP_FILE}#phoneme_id_map",
                                        "data": "espeak-ng-data", **fields})
    return make


@pytest.fixture
def bundle(tmp_path, npm_data) -> Path:
    """A bundle folder: the id map (inside a voice config, as Piper ships it) and the npm data."""
    (tmp_path / MAP_FILE).write_text(json.dumps({"espeak": {"voice": "en-us"}, "phoneme_id_map": PIPER_MAP}),
                                     encoding="utf-8")
    (tmp_path / "espeak-ng-data").symlink_to(npm_data / "espeak-ng-data")
    return tmp_path


class NodeEspeak:
    """The npm package in a Node process, one JSON line per request."""

    def __init__(self):
        need("node")
        self.proc = subprocess.Popen(["node", str(NODE_SCRIPT)], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8")
        self.ready = json.loads(self.proc.stdout.readline())

    def phonemize(self, voice: str, text: str) -> str:
        self.proc.stdin.write(json.dumps({"voice": voice, "text": text}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["ipa"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def node_espeak():
    engine = NodeEspeak()
    yield engine
    engine.close()


@pytest.fixture
def web_engine(monkeypatch, node_espeak):
    """phonemes.web.WebEspeak with the worker's `onnxpipe_js` and `pyodide.ffi` stood in by
    the Node process (run_sync gets the string itself instead of a Promise)."""
    class JsException(Exception):
        pass

    def phonemize(voice, text):
        try:
            return node_espeak.phonemize(voice, text)
        except RuntimeError as exc:
            raise JsException(str(exc)) from None

    ffi = types.ModuleType("pyodide.ffi")
    ffi.run_sync, ffi.JsException = (lambda value: value), JsException
    pyodide = types.ModuleType("pyodide")
    pyodide.ffi = ffi
    monkeypatch.setitem(sys.modules, "pyodide", pyodide)
    monkeypatch.setitem(sys.modules, "pyodide.ffi", ffi)
    monkeypatch.setitem(sys.modules, "onnxpipe_js", types.SimpleNamespace(phonemize=phonemize))
    from onnxpipe.phonemes.web import WebEspeak

    return WebEspeak()
