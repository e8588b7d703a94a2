"""Ray, imported on demand: a clear error when it is not installed, and one way to join a
cluster (or start a local instance) with the dashboard and usage reporting off."""

from __future__ import annotations

import logging
import os

from ..errors import InputError

INSTALL = "pip install 'onnxpipe[ray]'"
# Ray reads these when it starts its processes: no usage report leaves the machine
QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


def require_ray(flag: str = "--ray"):
    """The ``ray`` module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InputError(f"{flag}: needs Ray, which is not installed here ({exc.name or 'ray'} is missing): "
                         f"{INSTALL}") from None
    return ray


def connect(address: str | None, num_cpus: int | None = None, env: dict | None = None):
    """Join the cluster at ``address`` ("auto", HOST:PORT), or start a local Ray instance with
    ``num_cpus`` when there is none. ``env`` goes to the processes Ray starts here (a local
    instance inherits this process's environment). Returns the ``ray`` module."""
    ray = require_ray("--address" if address else "--ray")
    for name, value in {**QUIET_ENV, **(env or {})}.items():
        os.environ.setdefault(name, value)
    if ray.is_initialized():
        return ray
    options = dict(logging_level=logging.WARNING, log_to_driver=True)
    if address is None:
        options.update(num_cpus=num_cpus, include_dashboard=False)
    try:
        ray.init(address=address, **options)
    except ConnectionError as exc:
        raise InputError(f"--address {address}: cannot reach a Ray cluster there ({exc}); start one with "
                         "`ray start --head`. A cluster that asks for Ray's token (`ray start` turns token "
                         "authentication on when ~/.ray/auth_token is there) is joined with RAY_AUTH_MODE=token, "
                         "or with --address auto on one of its nodes (docs/scale-out.md)") from None
    return ray


def cluster_cpus(ray) -> float:
    """CPUs the cluster has now (every alive node's)."""
    return float(ray.cluster_resources().get("CPU", 0))
