"""onnxpipe.web_preload: what the worker imports before snapshotting Pyodide's heap.

It must reach no JavaScript object (the snapshot could not hold one), and it should cover every
onnxpipe module the web entry's imports pull in that is pure Python, so a restored snapshot
leaves only the JavaScript-facing modules to import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PY = Path(__file__).resolve().parents[2] / "py"
BROWSER_MODULES = {"js", "pyodide", "ort", "onnxpipe_js"}
JS_FACING = {"onnxpipe.backends.web", "onnxpipe.text.web", "onnxpipe.phonemes.web", "onnxpipe.web_entry"}


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sys.modules))"],
                         env={"PYTHONPATH": str(PY)}, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def _entry_imports() -> set[str]:
    """onnxpipe modules web_entry imports at its top level (relative imports resolved)."""
    tree = ast.parse((PY / "onnxpipe" / "web_entry.py").read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            base = "onnxpipe" + (f".{node.module}" if node.module else "")
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if (PY / Path(*candidate.split("."))).with_suffix(".py").exists()
                          or (PY / Path(*candidate.split("."))).is_dir() else base)
    return found


def test_preload_reaches_no_javascript_module():
    loaded = _modules_after("import onnxpipe.web_preload")
    assert not loaded & BROWSER_MODULES, sorted(loaded & BROWSER_MODULES)
    assert not loaded & JS_FACING, sorted(loaded & JS_FACING)


def test_preload_covers_the_pure_modules_the_web_entry_imports():
    wanted = _entry_imports() - JS_FACING
    assert "onnxpipe.api" in wanted and "onnxpipe.config.load" in wanted, wanted
    missing = wanted - _modules_after("import onnxpipe.web_preload")
    assert not missing, f"web_entry imports {sorted(missing)}, which onnxpipe.web_preload leaves out"
