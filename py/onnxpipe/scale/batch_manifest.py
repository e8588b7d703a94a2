"""A batch job's manifest, ``--output DIR/manifest.json``: the job (command, bundle, input) and
every record's status, written atomically (a temporary file renamed over the old one), as are the
outputs, so an interrupted job leaves whole files only and a re-run skips what is done.

A record is done when the manifest has it ``ok`` with the same digest and its output is there,
or refused for its input (``error`` of kind ``input``) with the same digest: the same line would
be refused again. Anything else runs: new or changed records, a missing output, a failure of the
engine or of a node.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from ..errors import InputError

FILE = "manifest.json"
VERSION = 1
SAVE_EVERY_S = 1.0   # a long job rewrites its manifest at most this often (and at the end)


def write_atomic(path: str, data: bytes) -> None:
    """``data`` at ``path`` whole or not at all: written beside it, flushed, renamed over it."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class Manifest:
    """The job's record of what is done; ``job`` is {command, bundle, input} (absolute paths)."""

    def __init__(self, folder: str, job: dict, records: dict | None = None):
        self.folder, self.job = folder, job
        self.records: dict[str, dict] = records or {}
        self.saved_at = 0.0
        self.lock = None

    @classmethod
    def open(cls, folder: str, job: dict) -> "Manifest":
        """The manifest in ``folder`` (a new one when there is none), held by this job alone until
        ``close`` (a second job writing there is refused), with the temporary files of a job that
        was killed mid-write swept away. A manifest of another job (another command, bundle or
        input) is refused: its outputs would be taken for this one's."""
        os.makedirs(folder, exist_ok=True)
        lock = _lock(folder)
        try:
            manifest = cls._read(folder, job)
        except BaseException:
            os.close(lock)
            raise
        manifest.lock = lock
        for root, _, names in os.walk(folder):
            for name in names:
                if name.startswith(".") and name.endswith(".part"):
                    os.unlink(os.path.join(root, name))
        return manifest

    def close(self) -> None:
        if self.lock is not None:
            os.close(self.lock)   # the flock goes with the descriptor
            self.lock = None

    @classmethod
    def _read(cls, folder: str, job: dict) -> "Manifest":
        path = os.path.join(folder, FILE)
        if not os.path.exists(path):
            return cls(folder, job)
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            raise InputError(f"--output {folder}: {FILE} cannot be read ({exc}); remove it to start over") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("records"), dict):
            raise InputError(f"--output {folder}: {FILE} is not a version {VERSION} onnxpipe batch manifest")
        theirs = doc.get("job", {})
        for name in ("command", "bundle", "input"):
            if theirs.get(name) != job[name]:
                raise InputError(f"--output {folder}: its {FILE} is another job's ({name} {theirs.get(name)!r}, "
                                 f"this job's {job[name]!r}); give another --output, or remove it to start over")
        return cls(folder, job, doc["records"])

    def done(self, record) -> bool:
        """Whether ``record`` (batch_records.Record) needs no run."""
        entry = self.records.get(record.key)
        if entry is None or entry.get("digest") != record.digest:
            return False
        if entry.get("status") == "ok":
            return os.path.exists(os.path.join(self.folder, entry["output"]))
        return entry.get("status") == "error" and entry.get("error", {}).get("kind") == "input"

    def put(self, key: str, entry: dict) -> None:
        self.records[key] = entry
        self.save(force=False)

    def counts(self) -> dict:
        out = {"ok": 0, "error": 0, "retried": 0}
        for entry in self.records.values():
            out[entry["status"]] += 1
            out["retried"] += bool(entry.get("retried"))
        return out

    def save(self, force: bool = True) -> None:
        """Rewrite the manifest (unless ``force`` is off and it was written under SAVE_EVERY_S ago)."""
        now = time.monotonic()
        if not force and now - self.saved_at < SAVE_EVERY_S:
            return
        doc = {"version": VERSION, "job": self.job, "summary": self.counts(),
               "records": dict(sorted(self.records.items()))}
        write_atomic(os.path.join(self.folder, FILE), (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode())
        self.saved_at = now


def _lock(folder: str) -> int:
    """An exclusive lock on ``folder/.lock``; refused while another job holds it."""
    import fcntl

    fd = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise InputError(f"--output {folder}: another batch job (pid {holder}) is writing there; wait for it, "
                         "or give another --output") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
