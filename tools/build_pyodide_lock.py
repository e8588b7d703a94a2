"""Build the onnxpipe wheel for Pyodide and a pyodide-lock.json that lists it.

Output (default build/pyodide/):
  onnxpipe-<version>-py3-none-any.whl   pure-Python wheel built by the setuptools backend
  pyodide-lock.json                      node_modules/pyodide/pyodide-lock.json + "onnxpipe"

The page's worker then does `loadPyodide({indexURL, lockFileURL})` and
`loadPackage('onnxpipe')`. The wheel is built from a clean copy of pyproject.toml + py/
(no stale build/lib, no egg-info in the tree), with SOURCE_DATE_EPOCH fixed so the same
sources give the same bytes. A digest of the sources is kept beside the wheel; when it
matches, nothing is rebuilt and an unchanged lockfile is not rewritten (idempotent, fast).

Usage: python tools/build_pyodide_lock.py [--out DIR] [--stock LOCK] [--force]
"""
from __future__ import annotations

import argparse
import copy
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
from onnxpipe.export.manifest import file_sha256  # noqa: E402  (stdlib only)

DEFAULT_OUT = ROOT / "build" / "pyodide"
DEFAULT_STOCK = ROOT / "node_modules" / "pyodide" / "pyodide-lock.json"
PACKAGE = "onnxpipe"
DIGEST_FILE = ".source-digest"
# 1980-01-01: the earliest zip timestamp; makes the wheel bytes reproducible
SOURCE_DATE_EPOCH = "315532800"
_IGNORED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}


def _source_files(root: Path) -> list[Path]:
    files = [root / "pyproject.toml"]
    for path in sorted((root / "py").rglob("*")):
        rel = path.relative_to(root / "py")
        if any(part in _IGNORED_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and path.suffix not in {".pyc", ".pyo"}:
            files.append(path)
    return files


def source_digest(root: Path = ROOT) -> str:
    h = hashlib.sha256()
    for path in _source_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()




def _copy_sources(root: Path, dest: Path) -> None:
    shutil.copy2(root / "pyproject.toml", dest / "pyproject.toml")
    for name in ("README.md", "LICENSE"):
        if (root / name).is_file():
            shutil.copy2(root / name, dest / name)
    shutil.copytree(
        root / "py",
        dest / "py",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "*.egg-info", ".*_cache"),
    )


def _default_python(root: Path) -> str:
    """The project's venv (it has setuptools) when there is one, else this interpreter."""
    venv = root / ".venv" / "bin" / "python"
    return str(venv) if venv.is_file() else sys.executable


def build_wheel(root: Path, out: Path, python: str) -> Path:
    """Build the wheel with the setuptools backend (no network, no build isolation)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="onnxpipe-wheel-") as tmp:
        src = Path(tmp) / "src"
        dist = Path(tmp) / "dist"
        src.mkdir()
        dist.mkdir()
        _copy_sources(root, src)
        env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPATH", None)
        code = (
            "import sys, setuptools.build_meta as b; "
            "print(b.build_wheel(sys.argv[1]))"
        )
        proc = subprocess.run(
            [python, "-c", code, str(dist)],
            cwd=src, env=env, capture_output=True, text=True,
        )
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            raise SystemExit(f"wheel build failed (exit {proc.returncode})")
        name = proc.stdout.strip().splitlines()[-1]
        built = dist / name
        if not built.is_file():
            raise SystemExit(f"wheel build did not produce {name!r}")
        for old in out.glob(f"{PACKAGE}-*.whl"):
            old.unlink()
        target = out / name
        shutil.move(str(built), target)
        return target


def _wheel_version(wheel: Path) -> str:
    m = re.match(rf"^{PACKAGE}-([^-]+)-", wheel.name)
    if not m:
        raise SystemExit(f"unexpected wheel name {wheel.name!r}")
    return m.group(1)


def lock_entry(wheel: Path) -> dict:
    return {
        "name": PACKAGE,
        "version": _wheel_version(wheel),
        "file_name": wheel.name,
        "install_dir": "site",
        "sha256": file_sha256(str(wheel)),
        "package_type": "package",
        "imports": [PACKAGE],
        "depends": [],
        "unvendored_tests": False,
        "tool": {},
    }


def make_lock(stock: dict, wheel: Path) -> dict:
    lock = copy.deepcopy(stock)
    lock["packages"][PACKAGE] = lock_entry(wheel)
    return lock


def _write_if_changed(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text() == text:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


def build(out: Path = DEFAULT_OUT, stock_lock: Path = DEFAULT_STOCK, *, root: Path = ROOT,
          python: str | None = None, force: bool = False) -> tuple[Path, Path]:
    """Build (or reuse) the wheel and write the lockfile. Returns (wheel, lockfile).

    Holds an exclusive lock on OUT/.lock, so parallel builds (vite + tests) never interleave.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        return _build_locked(out, Path(stock_lock), root=root, python=python, force=force)


def _build_locked(out: Path, stock_lock: Path, *, root: Path, python: str | None,
                  force: bool) -> tuple[Path, Path]:
    if not Path(stock_lock).is_file():
        raise SystemExit(f"{stock_lock} not found: run `npm ci` first")
    digest = source_digest(root)
    wheels = sorted(out.glob(f"{PACKAGE}-*.whl"))
    digest_path = out / DIGEST_FILE
    if (force or len(wheels) != 1 or not digest_path.is_file()
            or digest_path.read_text().strip() != digest):
        wheel = build_wheel(root, out, python or _default_python(root))
        digest_path.write_text(digest + "\n")
        rebuilt = True
    else:
        wheel = wheels[0]
        rebuilt = False
    stock = json.loads(Path(stock_lock).read_text())
    lock_path = out / "pyodide-lock.json"
    wrote = _write_if_changed(lock_path, json.dumps(make_lock(stock, wheel), indent=1) + "\n")
    state = "built" if rebuilt else "up to date"
    shown = wheel.relative_to(root) if wheel.is_relative_to(root) else wheel
    print(f"pyodide: {shown} {state}; lockfile {'written' if wrote else 'unchanged'}")
    return wheel, lock_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--stock", type=Path, default=DEFAULT_STOCK,
                    help="Pyodide's stock lockfile (node_modules/pyodide/pyodide-lock.json)")
    ap.add_argument("--python", default=None,
                    help="interpreter with setuptools to build the wheel (default: .venv's, else this one)")
    ap.add_argument("--force", action="store_true", help="rebuild the wheel even if unchanged")
    args = ap.parse_args(argv)
    build(args.out.resolve(), args.stock.resolve(), python=args.python, force=args.force)


if __name__ == "__main__":
    main()
