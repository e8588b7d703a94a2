"""The command line past one machine: ``onnxpipe batch ...`` and ``onnxpipe serve ... --ray``'s
flags, checked before anything starts (cli.py adds them to its parser). Ray is imported only
when a command runs on it."""

from __future__ import annotations

import argparse

from ..errors import InputError


def add_serve_ray_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads of each bundle's sessions (default: onnxruntime's, one per core; "
                        "with --ray: 1, and each replica holds that many CPUs)")
    p.add_argument("--ray", action="store_true",
                   help="deploy the server as a Ray Serve application: replicas behind one endpoint "
                        "(docs/scale-out.md)")
    p.add_argument("--address", help="with --ray: the Ray cluster to join (HOST:PORT or auto; default: start "
                                     "a local Ray instance)")
    p.add_argument("--replicas", type=int, help="with --ray: replicas of the server (default 1)")
    p.add_argument("--autoscale", metavar="MIN:MAX",
                   help="with --ray: between MIN and MAX replicas, added when requests queue past "
                        "--max-concurrent per replica")


def serve_plan(a):
    """(Replicas, threads) of ``onnxpipe serve --ray``, or None without --ray; bad combinations
    are refused naming the flag."""
    from .serve_ray import Replicas, parse_autoscale

    if a.threads is not None and a.threads < 1:
        raise InputError(f"--threads: expected an integer >= 1, found {a.threads}")
    if not a.ray:
        for flag, value in (("--address", a.address), ("--replicas", a.replicas), ("--autoscale", a.autoscale)):
            if value is not None:
                raise InputError(f"{flag}: only with --ray (it says where and how many replicas Ray Serve runs); "
                                 f"found {flag} {value} without --ray")
        return None
    if a.replicas is not None and a.autoscale is not None:
        raise InputError(f"--replicas {a.replicas} and --autoscale {a.autoscale}: give one (a fixed count, "
                         "or MIN:MAX to autoscale), found both")
    if a.replicas is not None and a.replicas < 1:
        raise InputError(f"--replicas: expected an integer >= 1, found {a.replicas}")
    if a.autoscale is not None:
        return Replicas(None, parse_autoscale(a.autoscale)), a.threads or 1
    return Replicas(a.replicas or 1), a.threads or 1


def add_batch_parser(sub, control) -> None:
    batch = sub.add_parser("batch", help="run a file or folder of records through a bundle, in process or on "
                                         "Ray Data (docs/scale-out.md)")
    batch.add_argument("task", choices=("speak", "transcribe", "generate"),
                       help="speak: text or JSONL -> WAV; transcribe: a folder of WAVs -> JSON; "
                            "generate: JSONL chat or completion requests -> JSON")
    batch.add_argument("bundle")
    batch.add_argument("--input", required=True, metavar="PATH",
                       help="speak: a text file (one utterance per line) or .jsonl; transcribe: a folder of "
                            ".wav files; generate: a .jsonl file")
    batch.add_argument("--output", required=True, metavar="DIR",
                       help="one file per record and manifest.json; a re-run skips what is done")
    batch.add_argument("--ray", action="store_true", help="run the records on a Ray Data actor pool")
    batch.add_argument("--address", help="with --ray: the Ray cluster to join (HOST:PORT or auto; default: "
                                         "start a local Ray instance)")
    batch.add_argument("--concurrency", type=int, help="with --ray: actors in the pool, each with the bundle "
                                                       "loaded (default 1)")
    batch.add_argument("--threads", type=int, default=1,
                       help="intra-op threads of each pipeline (default 1; on Ray each actor holds that many CPUs)")
    batch.add_argument("--set", action="append", type=control, metavar="NAME=VALUE",
                       help="speak: a voice control for every record (a record's own value wins), e.g. "
                            "noise_scale=0 (repeatable)")
    batch.set_defaults(func=cmd_batch)


def cmd_batch(a) -> int:
    from .batch_job import BatchJob, run_job

    if not a.ray:
        for flag, value in (("--address", a.address), ("--concurrency", a.concurrency)):
            if value is not None:
                raise InputError(f"{flag}: only with --ray (in process one pipeline runs the records in turn); "
                                 f"found {flag} {value} without --ray")
    if a.concurrency is not None and a.concurrency < 1:
        raise InputError(f"--concurrency: expected an integer >= 1, found {a.concurrency}")
    if a.threads < 1:
        raise InputError(f"--threads: expected an integer >= 1, found {a.threads}")
    if a.set and a.task != "speak":
        raise InputError(f"--set: voice controls are for batch speak, found batch {a.task}")
    if a.ray:
        from .ray_runtime import require_ray

        require_ray()
    job = BatchJob(a.task, a.bundle, a.input, a.output, a.ray, a.address, a.concurrency or 1, a.threads,
                   dict(a.set or []))
    return run_job(job)
