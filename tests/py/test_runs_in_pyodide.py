"""The browser path imports nothing Pyodide lacks: no numpy, onnx, onnxruntime or tokenizers.

Every module of the package is checked except the native-only ones listed here; Pyodide's
own modules (js, pyodide) and the worker's (ort, onnxpipe_js) are allowed in the web ones.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "py" / "onnxpipe"
NATIVE_ONLY = {"backends/native.py", "text/native.py",          # CPython + onnxruntime/tokenizers
               "grammar/native.py",                              # + xgrammar (the worker has web-xgrammar)
               "heap/native.py"}                                 # numpy: a heap plan carried out on disk
CPYTHON_ONLY_DIRS = {"export",                                  # model builders (`make models`)
                     "server",                                   # `onnxpipe serve` (FastAPI + uvicorn)
                     "scale"}                                    # Ray Serve / Ray Data (`serve --ray`, `batch`)
BROWSER_MODULES = {"js", "pyodide", "ort", "onnxpipe_js"}
LAZY_NATIVE = {"text/chat_template.py": {"jinja2"},             # imported only when rendering natively
               "image/files.py": {"PIL"},                        # image files natively (the CLI)
               "grammar/check.py": {"jsonschema"}}               # where installed; the worker reports "not checked"


def imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_browser_path_modules_import_only_what_pyodide_has():
    allowed = set(sys.stdlib_module_names) | {"__future__", "onnxpipe"} | BROWSER_MODULES
    checked = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in NATIVE_ONLY or rel.split("/")[0] in CPYTHON_ONLY_DIRS and rel != "export/manifest.py":
            continue
        extra = imported_names(path) - allowed - LAZY_NATIVE.get(rel, set())
        assert not extra, f"{rel} imports {sorted(extra)}, which the browser (Pyodide) does not have"
        checked += 1
    assert checked > 30
