"""tools/build_pyodide_lock.py: the wheel Pyodide installs and the lockfile that lists it."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tools import build_pyodide_lock as bpl

ROOT = Path(__file__).resolve().parents[3]
STOCK = ROOT / "node_modules" / "pyodide" / "pyodide-lock.json"

pytestmark = pytest.mark.skipif(not STOCK.is_file(), reason="node_modules/pyodide missing (npm ci)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("pyodide")
    wheel, lock_path = bpl.build(out, STOCK)
    return out, wheel, lock_path


def test_entry_matches_wheel(built):
    _, wheel, lock_path = built
    lock = json.loads(lock_path.read_text())
    entry = lock["packages"]["onnxpipe"]
    assert entry["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert entry["file_name"] == wheel.name
    assert wheel.name.endswith("-py3-none-any.whl")
    import onnxpipe
    assert entry["version"] == onnxpipe.__version__
    assert entry == {
        "name": "onnxpipe", "version": entry["version"], "file_name": wheel.name,
        "install_dir": "site", "sha256": entry["sha256"], "package_type": "package",
        "imports": ["onnxpipe"], "depends": [], "unvendored_tests": False, "tool": {},
    }


def test_wheel_holds_only_the_package(built):
    _, wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    dist_info = wheel.name.split("-py3")[0] + ".dist-info/"
    assert "onnxpipe/__init__.py" in names
    assert all(n.startswith(("onnxpipe/", dist_info)) for n in names), names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert not any(n.startswith("tests/") or "/tests/" in n for n in names)
    # every package module of the source tree is in the wheel
    src = sorted(p.relative_to(ROOT / "py").as_posix() for p in (ROOT / "py" / "onnxpipe").rglob("*.py")
                 if "__pycache__" not in p.parts)
    assert set(src) <= set(names)


def test_stock_entries_unchanged(built):
    _, _, lock_path = built
    stock = json.loads(STOCK.read_text())
    lock = json.loads(lock_path.read_text())
    assert lock["info"] == stock["info"]
    assert lock.keys() == stock.keys()
    assert {k: v for k, v in lock.items() if k != "packages"} == {
        k: v for k, v in stock.items() if k != "packages"}
    assert set(lock["packages"]) == set(stock["packages"]) | {"onnxpipe"}
    for name, entry in stock["packages"].items():
        assert lock["packages"][name] == entry


def test_idempotent(built):
    out, wheel, lock_path = built
    before = (wheel.read_bytes(), lock_path.stat().st_mtime_ns)
    wheel2, lock2 = bpl.build(out, STOCK)
    assert wheel2 == wheel and lock2 == lock_path
    assert (wheel.read_bytes(), lock_path.stat().st_mtime_ns) == before


def test_rebuild_is_reproducible(built, tmp_path):
    _, wheel, _ = built
    wheel2, _ = bpl.build(tmp_path, STOCK, force=True)
    assert wheel2.name == wheel.name
    assert wheel2.read_bytes() == wheel.read_bytes()
