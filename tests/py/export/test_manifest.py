"""The bundle manifest writer: sizes, hashes, ordering, exclusions; standard library only."""

import ast
import hashlib
import json
import sys

import pytest

from onnxpipe.export import manifest
from onnxpipe.export.manifest import write_manifest


def test_manifest_module_imports_only_the_standard_library():
    # It also runs in Pyodide.
    tree = ast.parse(open(manifest.__file__, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or top == "__future__", f"manifest.py imports {name}"


def test_write_manifest_lists_files_sorted_with_sizes_and_hashes(tmp_path):
    files = {
        "model.onnx": b"\x08\x07onnx",
        "b.json": b"{}",
        "sub/dir/weights.bin": bytes(range(256)) * 5000,  # more than one read chunk
        "empty.txt": b"",
    }
    for rel, data in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (tmp_path / ".built").write_text("stamp")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "x.bin").write_bytes(b"hidden")
    (tmp_path / "manifest.json").write_text("stale")

    out = write_manifest(str(tmp_path))

    assert out == str(tmp_path / "manifest.json")
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert written == {
        "version": 1,
        "files": [
            {"path": rel, "bytes": len(files[rel]), "sha256": hashlib.sha256(files[rel]).hexdigest()}
            for rel in ["b.json", "empty.txt", "model.onnx", "sub/dir/weights.bin"]
        ],
    }
    # Writing again gives the same bytes: the manifest never lists itself.
    before = (tmp_path / "manifest.json").read_bytes()
    write_manifest(str(tmp_path))
    assert (tmp_path / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_write_manifest_of_a_missing_folder_names_it(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="nope"):
        write_manifest(str(missing))
