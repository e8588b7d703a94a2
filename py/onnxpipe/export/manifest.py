"""Write a bundle's manifest.json: every file with its byte size and sha256.

Pure standard library, so it runs under CPython and Pyodide alike. The manifest feeds
download progress, integrity checks and the offline cache.
"""

from __future__ import annotations

import hashlib
import json
import os

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
_CHUNK = 1 << 20


def file_sha256(path: str) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def list_bundle_files(bundle_dir: str) -> list[str]:
    """Relative paths (forward slashes, sorted) of the bundle's files.

    Skips manifest.json at the top level and any hidden file or folder (a name starting with '.').
    """
    found = []
    for root, dirs, files in os.walk(bundle_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel_root = os.path.relpath(root, bundle_dir)
        for name in files:
            if name.startswith("."):
                continue
            rel = name if rel_root == "." else os.path.join(rel_root, name)
            rel = rel.replace(os.sep, "/")
            if rel == MANIFEST_NAME:
                continue
            found.append(rel)
    return sorted(found)


def build_manifest(bundle_dir: str) -> dict:
    """The manifest as a dict: {"version": 1, "files": [{"path", "bytes", "sha256"}, ...]}."""
    entries = []
    for rel in list_bundle_files(bundle_dir):
        full = os.path.join(bundle_dir, *rel.split("/"))
        entries.append({"path": rel, "bytes": os.path.getsize(full), "sha256": file_sha256(full)})
    return {"version": MANIFEST_VERSION, "files": entries}


def write_manifest(bundle_dir: str) -> str:
    """Write bundle_dir/manifest.json and return its path."""
    if not os.path.isdir(bundle_dir):
        raise FileNotFoundError(f"write_manifest: bundle folder {bundle_dir!r} does not exist")
    manifest = build_manifest(bundle_dir)
    path = os.path.join(bundle_dir, MANIFEST_NAME)
    tmp = os.path.join(bundle_dir, "." + MANIFEST_NAME + ".tmp")  # hidden: never listed
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    return path
