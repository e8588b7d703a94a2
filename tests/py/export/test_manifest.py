"""The bundle manifest writer: sizes, hashes, ordering, exclusions; standard library only."""

import hashlib
import json

import pytest

from onnxpipe.export.manifest import write_manifest


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
