"""``onnxpipe batch speak|transcribe|generate BUNDLE --input PATH --output DIR``: read the records,
skip what the manifest says is done, run the rest in process (one RecordWorker) or on a Ray Data
actor pool (``--ray``), and write each output and the manifest as the records finish. The same
records give the same output files either way.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field

from ..errors import InputError
from .batch_manifest import Manifest, write_atomic
from .batch_records import other_files, output_name, read_records, safe_under
from .batch_work import KINDS, RecordWorker


@dataclass
class BatchJob:
    command: str                   # speak | transcribe | generate
    bundle: str
    input: str
    output: str
    ray: bool = False
    address: str | None = None
    concurrency: int = 1           # actors in the pool (--ray)
    threads: int = 1               # intra-op threads per pipeline (per actor on Ray)
    controls: dict = field(default_factory=dict)   # speak: --set NAME=VALUE, under each record's own


def check_bundle(command: str, bundle: str) -> None:
    """The bundle's kind must be the command's, known from its config before any session opens."""
    from ..config.load import load_config
    from ..loops import loop_for
    from ..pipeline.loaded import bundle_kind

    config = load_config(bundle)
    kind = bundle_kind(config.spec, loop_for(config.spec.generation.loop, config.file))
    if kind != KINDS[command]:
        raise InputError(f"{bundle}: batch {command} takes a {KINDS[command]} bundle; this one is a {kind} bundle")


def run_job(job: BatchJob, log=None) -> int:
    """Run ``job``; 0 when every record is done, 1 when some failed (the manifest says which)."""
    from ..server.models import model_id

    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    bundle, source = os.path.abspath(job.bundle), os.path.abspath(job.input)
    want = job.concurrency * job.threads
    if job.ray and job.address is None and want > (os.cpu_count() or 1):
        raise InputError(f"--concurrency {job.concurrency} x --threads {job.threads} needs {want} CPUs; this "
                         f"machine has {os.cpu_count()}, so a local Ray instance can't place the pool "
                         "(join a cluster with --address)")
    check_bundle(job.command, bundle)
    records = read_records(job.command, source, model_id(bundle)[0], job.controls)
    manifest = Manifest.open(job.output, {"command": job.command, "bundle": bundle, "input": source})
    try:
        return _work_through(job, bundle, source, records, manifest, log)
    finally:
        manifest.close()


def _work_through(job: BatchJob, bundle: str, source: str, records: list, manifest: Manifest, log) -> int:
    for record in records:
        if record.error is not None:
            manifest.records[record.key] = {"source": record.source, "digest": "", "status": "error", "attempts": 0,
                                            "error": {"kind": "input", "message": record.error,
                                                      "field": record.field}}
            log(f"refused {record.error}")
    pending = [r for r in records if r.error is None and not manifest.done(r)]
    running = {r.key for r in pending}
    done = sum(r.error is None and r.key not in running and manifest.records[r.key]["status"] == "ok"
               for r in records)
    refused = len(records) - len(pending) - done   # refused here, or by the worker for the same input before
    if job.command == "transcribe" and other_files(source):
        log(f"{other_files(source)} file(s) in {job.input} are not .wav: left out")
    where = f"on Ray ({job.concurrency} actor(s) x {job.threads} thread(s))" if job.ray else "in process"
    log(f"batch {job.command}: {len(records)} record(s): {done} done before, {refused} refused, "
        f"{len(pending)} to run {where}")
    try:
        if pending:
            _run(job, bundle, pending, manifest, log)
    finally:
        manifest.save()
    counts = manifest.counts()
    log(f"batch {job.command}: {counts['ok']} ok, {counts['error']} failed, {counts['retried']} retried; "
        f"{os.path.join(job.output, 'manifest.json')}")
    return 1 if counts["error"] else 0


def _run(job: BatchJob, bundle: str, pending: list, manifest: Manifest, log) -> None:
    by_key = {r.key: r for r in pending}
    run = None
    if job.ray:
        from .batch_ray import RayRun
        from .ray_runtime import connect

        ray = sys.modules.get("ray")
        joined = ray is None or not ray.is_initialized()   # this job joins (and leaves) the cluster
        run = RayRun(connect(job.address), job.command, bundle, job.concurrency, job.threads, leave=joined)
        room = run.check_room()
        if room:
            log(f"warning: {room}")
        results = run.results([r.row() for r in pending])
    else:
        worker = RecordWorker(job.command, bundle, job.threads)
        results = ((r.key, *_encoded(worker.one(r.key, r.source, r.payload))) for r in pending)
    start = time.perf_counter()
    try:
        for n, (key, status, data, entry_json) in enumerate(results, 1):
            record, entry = by_key[key], json.loads(entry_json)
            entry.update(digest=record.digest, status=status, attempts=1)
            if status == "ok":
                name = output_name(job.command, key)
                write_atomic(safe_under(job.output, name), data)
                entry["output"] = name
            manifest.put(key, entry)
            said = "ok" if status == "ok" else f"failed: {entry['error']['message']}"
            log(f"[{n}/{len(pending)}] {key} {said} ({entry['seconds']:.2f} s, {entry['where']}; "
                f"{time.perf_counter() - start:.1f} s in)")
        if run is not None:   # the manifest says which records ran more than once (a node died under them)
            for key, count in run.attempts().items():
                if key in manifest.records and key in by_key:
                    manifest.records[key].update(attempts=count, retried=count > 1)
    finally:
        if run is not None:
            run.close()


def _encoded(one: tuple[str, bytes, dict]) -> tuple[str, bytes, str]:
    status, data, entry = one
    return status, data, json.dumps(entry)
