"""The work of a batch job: ``RecordWorker`` loads the bundle once and runs records through the
same pipeline calls as the CLI (``pipe.speak``, ``pipe.transcribe``, ``pipe.chat`` /
``pipe.generate``). In process it is called record by record; on Ray it is the callable class of
``map_batches``, one per actor of the pool (scale/batch_ray.py).

A call takes a batch of rows ``{key, source, payload}`` and returns one row per record: its
status, the output file's bytes (the same bytes whichever way the job runs: nothing in them
depends on timing) and what the manifest keeps of it. A record's failure is its row's error,
never the worker's: the pool goes on.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time

from ..errors import InputError, OnnxpipeError


def _json_bytes(doc: dict) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n").encode()


def speak(pipe, payload: dict):
    result = pipe.speak(payload["text"], **payload["controls"])
    return result.wav(), {"audio_seconds": round(result.audio_seconds, 6), "sentences": len(result.sentences)}


def transcribe(pipe, payload: dict):
    from ..audio import decode_wav

    with open(payload["path"], "rb") as f:
        samples, rate, channels = decode_wav(f.read())
    if channels > 1:   # as `onnxpipe transcribe` reads a file: channels averaged
        samples = [sum(samples[i:i + channels]) / channels for i in range(0, len(samples), channels)]
    if not samples:
        raise InputError("the WAV file holds no samples")
    result = pipe.transcribe(samples, rate)
    out = {"text": result.text, "tokens": result.tokens, "audio_seconds": round(result.audio_seconds, 6),
           "windows": [{"start_seconds": round(w.start_seconds, 3), "end_seconds": round(w.end_seconds, 3),
                        "text": w.text, "tokens": w.tokens} for w in result.windows]}
    return _json_bytes(out), {"audio_seconds": out["audio_seconds"]}


def generate(pipe, payload: dict):
    from ..server.chat import chat_call, completion_call

    chat = "messages" in payload
    call = (chat_call if chat else completion_call)(dict(payload))
    pipe.reset()   # each record stands alone: no state carried from the one before
    if chat:
        result = pipe.chat(call.messages, **call.options)
    else:
        result = pipe.generate(call.prompt, **call.options)
    out = {"text": result.text, "tokens": result.tokens, "finish_reason": result.finish_reason,
           "prompt_tokens": result.prompt_tokens}
    if result.tool_calls is not None:
        out["tool_calls"] = result.tool_calls
    return _json_bytes(out), {"completion_tokens": len(result.tokens), "prompt_tokens": result.prompt_tokens}


CONTROL = re.compile(r'control "([^"]+)"')
RUNS = {"speak": speak, "transcribe": transcribe, "generate": generate}
KINDS = {"speak": "speech", "transcribe": "transcription", "generate": "text"}


class RecordWorker:
    """One loaded bundle that runs records of ``command``. ``threads``: intra-op threads of its
    sessions (on Ray, the CPUs its actor holds). ``attempts``: on Ray, the job's AttemptLog actor,
    told of each record as it starts, so the manifest can say which ran more than once."""

    def __init__(self, command: str, bundle: str, threads: int = 1, attempts=None):
        from ..api import load
        from ..backends.native import NativeBackend

        self.command, self.run, self.attempts = command, RUNS[command], attempts
        self.pipe = load(bundle, backend=NativeBackend(threads=threads))
        if self.pipe.kind != KINDS[command]:
            raise InputError(f"{bundle}: batch {command} takes a {KINDS[command]} bundle; this one is a "
                             f"{self.pipe.kind} bundle")
        self.where = _where()

    def __call__(self, batch: dict) -> dict:
        out = {"key": [], "status": [], "output": [], "entry": []}
        for key, source, payload in zip(batch["key"], batch["source"], batch["payload"]):
            key, source = str(key), str(source)
            status, data, entry = self.one(key, source, json.loads(str(payload)))
            out["key"].append(key)
            out["status"].append(status)
            out["output"].append(data)
            out["entry"].append(json.dumps(entry))
        return out

    def one(self, key: str, source: str, payload: dict) -> tuple[str, bytes, dict]:
        """(status, output bytes, manifest entry) of one record; its errors are its own."""
        if self.attempts is not None:
            import ray

            ray.get(self.attempts.begin.remote(key))
        start = time.perf_counter()
        entry = {"source": source, "where": self.where}
        try:
            data, info = self.run(self.pipe, payload)
            entry.update(info)
            status = "ok"
        except Exception as exc:   # noqa: BLE001 - a record's failure is its row's, the job goes on
            data, status = b"", "error"
            entry["error"] = failure(exc, source)
        entry["seconds"] = round(time.perf_counter() - start, 3)
        return status, data, entry


def failure(exc: BaseException, source: str) -> dict:
    """A record's error for the manifest: {kind, message naming the record, field?}."""
    from ..server.errors import APIError

    if isinstance(exc, APIError):   # a request body's field refused (generate)
        return {"kind": "input" if exc.status == 400 else "engine", "message": f"{source}: {exc.message}",
                "field": exc.param}
    if isinstance(exc, OnnxpipeError):
        out = {"kind": exc.kind, "message": f"{source}: {exc.message}"}
        named = CONTROL.search(exc.message)   # engine/controls.py's refusals name the control so
        if named:
            out["field"] = named.group(1)
        return out
    if isinstance(exc, OSError):
        return {"kind": "input", "message": f"{source}: cannot read it: {exc.strerror or exc}"}
    return {"kind": "engine", "message": f"{source}: {type(exc).__name__}: {exc}"}


def _where() -> str:
    """host:pid, and the Ray node when on Ray: which worker ran a record."""
    here = f"{socket.gethostname()}:{os.getpid()}"
    try:
        import sys

        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            return f"{here} node {ray.get_runtime_context().get_node_id()[:12]}"
    except Exception:   # noqa: BLE001 - only a label
        pass
    return here
