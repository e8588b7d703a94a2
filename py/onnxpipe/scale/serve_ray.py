"""``onnxpipe serve BUNDLE ... --ray``: the same OpenAI-compatible app as ``onnxpipe serve``,
deployed as a Ray Serve application (docs/scale-out.md). Each replica (serve_replica.py) loads
its bundles once and batches its own requests; Serve routes requests across the replicas behind
one HTTP endpoint, checks their health, replaces one that dies and, with ``--autoscale``, adds and
removes replicas by how many requests each holds (its queue depth).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass

from ..errors import BundleError, InputError
from .replica_lost import CALLBACK
from .ray_runtime import QUIET_ENV, connect

log = logging.getLogger("onnxpipe.server")

APP = "onnxpipe"
# a queue over the target for this long adds a replica; one this long under it removes one
UPSCALE_DELAY_S, DOWNSCALE_DELAY_S = 5.0, 60.0
HEALTH_CHECK_PERIOD_S = 5.0
PROXY_ENV = {"RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH": CALLBACK, **QUIET_ENV}


@dataclass(frozen=True)
class Replicas:
    fixed: int | None = 1                   # --replicas N
    autoscale: tuple[int, int] | None = None   # --autoscale MIN:MAX

    @property
    def least(self) -> int:
        return self.autoscale[0] if self.autoscale else self.fixed


def parse_autoscale(text: str) -> tuple[int, int]:
    low, colon, high = text.partition(":")
    try:
        lo, hi = int(low), int(high)
    except ValueError:
        lo = hi = -1
    if not colon or lo < 1 or hi < lo:
        raise InputError(f"--autoscale: expected MIN:MAX, two integers with 1 <= MIN <= MAX (e.g. 1:4), found {text!r}")
    return lo, hi


def deployment_options(limits, replicas: Replicas, threads: int) -> dict:
    """The Serve deployment options of the replicas: each holds ``threads`` CPUs and is sent at
    most its rows plus its queue (--max-concurrent + --max-queue) at once; autoscaling aims at
    --max-concurrent requests per replica."""
    options = {"name": "OnnxpipeReplica", "ray_actor_options": {"num_cpus": threads},
               "max_ongoing_requests": limits.max_concurrent + limits.max_queue,
               "health_check_period_s": HEALTH_CHECK_PERIOD_S}
    if replicas.autoscale:
        lo, hi = replicas.autoscale
        options["autoscaling_config"] = {"min_replicas": lo, "max_replicas": hi,
                                         "target_ongoing_requests": limits.max_concurrent,
                                         "upscale_delay_s": UPSCALE_DELAY_S, "downscale_delay_s": DOWNSCALE_DELAY_S}
    else:
        options["num_replicas"] = replicas.fixed
    return options


def bundle_paths(bundles: list[str]) -> list[str]:
    """ID=FOLDER and FOLDER with absolute folders: replicas do not start where this process does."""
    from ..server.models import model_id

    out = []
    for spec in bundles:
        name, path = model_id(spec)
        if not os.path.isdir(path):
            raise BundleError(f"{path}: not a bundle folder")
        out.append(f"{name}={os.path.abspath(path)}")
    return out


def deploy(bundles: list[str], limits, host: str, port: int, address: str | None, replicas: Replicas,
           threads: int):
    """Start (or join) Ray, start Serve's proxy on ``host:port`` and run the application; returns
    the ``ray`` module once the replicas are up. A local instance (no ``address``) must hold them."""
    paths = bundle_paths(bundles)
    if address is None and replicas.least * threads > (os.cpu_count() or 1):
        flag = "--autoscale MIN" if replicas.autoscale else "--replicas"
        raise InputError(f"{flag} {replicas.least} x --threads {threads} needs {replicas.least * threads} CPUs; "
                         f"this machine has {os.cpu_count()}, so a local Ray instance can't place them "
                         "(join a cluster with --address)")
    ray = connect(address, env=PROXY_ENV)
    from ray import serve

    from .serve_replica import OnnxpipeReplica

    serve.start(http_options={"host": host, "port": port}, proxy_location="HeadOnly",
                controller_options={"runtime_env": {"env_vars": PROXY_ENV}})
    app = OnnxpipeReplica.options(**deployment_options(limits, replicas, threads)).bind(paths, limits, threads)
    try:
        serve.run(app, name=APP, route_prefix="/")
    except RuntimeError as exc:   # a replica could not start: its error says why
        why = replica_error(serve) or exc
        serve.delete(APP)   # a failed application stays on a cluster otherwise
        raise BundleError(f"the replicas did not start: {why}") from None
    return ray


def replica_error(serve) -> str | None:
    """The last line of the traceback Serve keeps for a deployment whose replicas failed."""
    try:
        deployments = serve.status().applications[APP].deployments.values()
    except (KeyError, AttributeError):
        return None
    for deployment in deployments:
        lines = [line.strip() for line in (deployment.message or "").splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return None


def serve_on_ray(bundles: list[str], limits, host: str, port: int, address: str | None, replicas: Replicas,
                 threads: int) -> None:
    """Deploy, then wait until interrupted; then remove the application (and a local Ray)."""
    ray = deploy(bundles, limits, host, port, address, replicas, threads)
    from ray import serve

    count = f"{replicas.autoscale[0]} to {replicas.autoscale[1]}" if replicas.autoscale else str(replicas.fixed)
    log.info("serving http://%s:%d/v1 on Ray: %s replica(s) of %s (Ray Serve application %r); Ctrl-C stops it",
             host, port, count, ", ".join(b.split("=", 1)[0] for b in bundle_paths(bundles)), APP)
    signal.signal(signal.SIGTERM, _interrupt)   # a service manager's stop: the same clean end as Ctrl-C
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        serve.delete(APP)
        if address is None:
            serve.shutdown()
            ray.shutdown()


def _interrupt(signum, frame):
    raise KeyboardInterrupt
