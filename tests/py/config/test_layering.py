"""config/ is the bottom layer: it imports only itself, onnxpipe.errors and the standard library.

Stages (loops, search, engine, speech, image, diffusion, ...) import config and register
their names and load-time checks with it (config/registry.py); an import the other way would
run up the layers. Imports inside functions count too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PY = Path(__file__).resolve().parents[3] / "py"
CONFIG = PY / "onnxpipe" / "config"
BOTTOM = {"onnxpipe.errors"}               # the modules below config
BANNED_STDLIB = {"importlib"}              # an import by name would hide an upward arrow


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, relative ones resolved."""
    package = "onnxpipe.config"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            # `from .. import x` / `from . import x` import modules named by the alias
            names = [f"{base}.{a.name}" for a in node.names] if not node.module else [base]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            found.append((node.lineno, "__import__"))
    return found


def _allowed(module: str) -> bool:
    if module == "__future__" or module in BOTTOM:
        return True
    if module == "onnxpipe.config" or module.startswith("onnxpipe.config."):
        return True
    top = module.split(".")[0]
    return top in sys.stdlib_module_names and top not in BANNED_STDLIB


def test_config_imports_no_stage_module():
    files = sorted(CONFIG.glob("*.py"))
    assert files and (CONFIG / "validate.py") in files
    upward = [f"{path.relative_to(PY)}:{line}: imports {module}"
              for path in files for line, module in _imports(path) if not _allowed(module)]
    assert not upward, "config/ must not import the layers above it:\n" + "\n".join(upward)


def test_the_check_sees_relative_and_function_level_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from . import schema\nfrom ..errors import ConfigError\nimport os\n"
                     "def f():\n    from ..loops import streaming\n    from .. import search\n"
                     "    import importlib\n    __import__('onnxpipe.loops')\n")
    modules = [m for _, m in _imports(probe)]
    assert modules == ["onnxpipe.config.schema", "onnxpipe.errors", "os", "onnxpipe.loops",
                       "onnxpipe.search", "importlib", "__import__"]
    assert [m for m in modules if not _allowed(m)] == ["onnxpipe.loops", "onnxpipe.search", "importlib",
                                                        "__import__"]


def test_importing_config_alone_fills_its_registries():
    """Any import of the package (here config alone, in a fresh interpreter) registers every
    stage's names and load-time checks first (onnxpipe/__init__.py imports onnxpipe.stages)."""
    code = ("from onnxpipe.config.registry import LOOPS, SCHEDULERS, stage_checks\n"
            "print(','.join(LOOPS)); print(','.join(SCHEDULERS)); print(','.join(n for n, _ in stage_checks()))")
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(PY)}, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["autoregressive,single_pass,streaming,denoising", "euler_discrete,ddim",
                   "controls,streaming,denoising,image_output,speculative,search_options,speech_segments,vision"]


def test_every_module_that_registers_is_imported_by_stages():
    """A stage that registers but is left out of onnxpipe/stages.py would register only when
    something else happens to import it: its check would be skipped at some loads."""
    registering = set()
    for path in sorted((PY / "onnxpipe").rglob("*.py")):
        if CONFIG in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
                if name == "register_check" or (name == "register" and owner in ("LOOPS", "SCHEDULERS")):
                    parts = path.relative_to(PY).with_suffix("").parts
                    registering.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    assert {"onnxpipe.loops", "onnxpipe.diffusion", "onnxpipe.loops.streaming",
            "onnxpipe.search.options"} <= registering
    code = "import sys, onnxpipe.config\nprint('\\n'.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(PY)},
                                capture_output=True, text=True, check=True).stdout.split())
    assert not registering - loaded, sorted(registering - loaded)
