"""The records of a batch job, read from ``--input`` (docs/scale-out.md):

- ``speak``: a text file, one utterance per line (blank lines skipped), or a ``.jsonl`` file of
  ``{"text", "id"?, CONTROL: VALUE...}`` (the voice's controls: voice, noise_scale, speed...);
- ``transcribe``: a folder of WAV files, searched recursively;
- ``generate``: a JSONL file of chat (``{"messages"}``) or completion (``{"prompt"}``) requests in
  OpenAI's fields (max_tokens, temperature, seed, stop, response_format...), ``"id"?``.

Each becomes a Record: its key (the output's name), where it came from (``file:line`` or the
WAV's path), the payload the worker runs and a digest of everything that decides its output (a
re-run redoes a record whose digest changed). A line that is refused here (not JSON, a field of
the wrong type, a duplicate id) is a Record with its ``error``: it goes in the manifest, and the
job goes on. What needs the model (a control the voice lacks) is the worker's to refuse.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

COMMANDS = {"speak": ".wav", "transcribe": ".json", "generate": ".json"}   # command -> output suffix
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RESERVED = {"manifest"}   # DIR/manifest.json is the job's own
# generate: a record is a request body; these are the job's, not a record's
NOT_IN_RECORDS = {"stream": "a batch job writes each reply whole", "stream_options": "a batch job does not stream"}


@dataclass
class Record:
    key: str                       # the output file's name without its suffix
    source: str                    # "lines.txt:7", "clips/a.wav": named in every message about it
    payload: dict = field(default_factory=dict)   # what the worker runs (JSON-able)
    digest: str = ""               # sha256 of what decides the output
    error: str | None = None       # refused before it ran: the message (with source)
    field: str | None = None       # the record's field at fault, when one is

    def row(self) -> dict:
        """The record as a Ray Data row (plain strings)."""
        return {"key": self.key, "source": self.source, "payload": json.dumps(self.payload)}


def read_records(command: str, path: str, model: str, controls: dict | None = None) -> list[Record]:
    """Every record of ``path`` for ``command``; ``model`` is the bundle's id (a generate record
    may name it), ``controls`` speak's job-wide ``--set`` values (a record's own win)."""
    if command == "transcribe":
        return _wav_records(path)
    file = Path(path)
    if not file.is_file():
        raise InputError(f"--input {path}: expected a {'text or JSONL' if command == 'speak' else 'JSONL'} "
                         f"file, found {'a folder' if file.is_dir() else 'nothing there'}")
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"--input {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"--input {path}: cannot read it: {exc.strerror}") from None
    width = max(5, len(str(len(lines))))
    jsonl = command == "generate" or file.suffix.lower() == ".jsonl"
    records, seen = [], {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        source, key = f"{file.name}:{n}", f"line-{n:0{width}d}"
        if not jsonl:
            record = _speak_record(source, key, {"text": line.strip()}, controls or {})
        else:
            record = _json_record(command, source, key, line, model, controls or {})
        _unique(record, seen)
        records.append(record)
    return records


def _json_record(command: str, source: str, key: str, line: str, model: str, controls: dict) -> Record:
    try:
        body = json.loads(line)
    except ValueError as exc:
        return Record(key, source, error=f"{source}: not JSON: {exc}")
    if not isinstance(body, dict):
        return Record(key, source, error=f"{source}: expected a JSON object, found {type(body).__name__}")
    if "id" in body:
        given = body.pop("id")
        if not isinstance(given, str) or not KEY.fullmatch(given) or given in RESERVED:
            why = "names the job's own manifest" if given in RESERVED else \
                "expected letters, digits, '.', '_' or '-' (up to 128, a letter or digit first)"
            return Record(key, source, error=f"{source}: id: {why}, found {given!r:.60}", field="id")
        key = given
    if command == "speak":
        return _speak_record(source, key, body, controls)
    return _generate_record(source, key, body, model)


def _speak_record(source: str, key: str, body: dict, controls: dict) -> Record:
    text = body.pop("text", None)
    if not isinstance(text, str) or not text.strip():
        return Record(key, source, error=f"{source}: text: expected the words to speak, found {text!r:.60}",
                      field="text")
    payload = {"text": text, "controls": {**controls, **body}}   # checked against the voice by the worker
    return Record(key, source, payload, _digest(payload))


def _generate_record(source: str, key: str, body: dict, model: str) -> Record:
    from ..server.chat import chat_call, completion_call
    from ..server.errors import APIError

    for name, why in NOT_IN_RECORDS.items():
        if name in body:
            return Record(key, source, error=f"{source}: {name}: {why}; leave it out", field=name)
    named = body.setdefault("model", model)
    if named != model:
        return Record(key, source, error=f"{source}: model: this job runs {model!r}, found {named!r:.60} "
                      "(leave it out, or run its own job)", field="model")
    if ("messages" in body) == ("prompt" in body):
        return Record(key, source, error=f"{source}: expected either messages (a chat) or prompt (a completion)",
                      field="messages")
    try:
        (chat_call if "messages" in body else completion_call)(dict(body))
    except APIError as exc:
        return Record(key, source, error=f"{source}: {exc.message}", field=exc.param)
    return Record(key, source, body, _digest(body))


def _wav_records(path: str) -> list[Record]:
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"--input {path}: transcribe reads a folder of WAV files, found "
                         f"{'a file' if folder.is_file() else 'nothing there'}")
    records = []
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".wav"):
        rel = file.relative_to(folder)
        key = rel.with_suffix("").as_posix()
        stat = file.stat()
        # size and modification time decide "changed": hashing an archive of recordings costs a read of it
        payload = {"path": str(file.resolve())}
        records.append(Record(key, rel.as_posix(), payload, _digest({**payload, "size": stat.st_size,
                                                                      "mtime_ns": stat.st_mtime_ns})))
    if not records:
        raise InputError(f"--input {path}: no .wav file in that folder (or below it)")
    return records


def other_files(path: str) -> int:
    """Files under a transcribe folder that are not .wav (left out; the job says how many)."""
    return sum(1 for p in Path(path).rglob("*") if p.is_file() and p.suffix.lower() != ".wav")


def _unique(record: Record, seen: dict) -> None:
    if record.key in seen:
        record.error = f"{record.source}: id: {record.key!r} is also {seen[record.key]}'s"
        record.field = "id"
        record.key = f"{record.key}@{record.source.rsplit(':', 1)[1]}"
    else:
        seen[record.key] = record.source


def _digest(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def output_name(command: str, key: str) -> str:
    return key + COMMANDS[command]


def safe_under(folder: str, name: str) -> str:
    """``folder/name``, refusing a name that would leave the folder."""
    out = os.path.normpath(os.path.join(folder, name))
    if not out.startswith(os.path.normpath(folder) + os.sep):
        raise InputError(f"{name}: an output name must stay inside --output {folder}")
    return out
