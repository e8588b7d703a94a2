"""What the scale-out tests share: a real local multi-node Ray cluster (``ray.cluster_utils.Cluster``:
a head and worker nodes on this machine, one or two CPUs each), `python -m onnxpipe` as a user
runs it, and the tiny bundles the records go through."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "public" / "models"
VOICE = MODELS / "piper-en-us-joe"
CHAT = MODELS / "smollm2-135m-instruct"
# Ray's processes start with this environment: nothing reports usage, onnxpipe is importable
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "py"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
ENV = dict(os.environ)
JOB_TIMEOUT_S = 300   # one batch job or server start on the 2-core machine; they take seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def built(bundle: Path) -> Path:
    if not any(bundle.glob("*.onnx")):
        pytest.skip(f"{bundle} is not built: run `make models`")
    return bundle


@contextmanager
def ray_cluster(head_cpus: int, worker_cpus: list[int]):
    """A head (no dashboard) and one worker node per entry of ``worker_cpus``; yields the Cluster,
    shut down (every node's processes) at the end."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False})
    try:
        for cpus in worker_cpus:
            cluster.add_node(num_cpus=cpus)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def onnxpipe(*args: str, **kw) -> subprocess.Popen:
    """`python -m onnxpipe ARGS` in a subprocess (its own Ray driver), output in one stream."""
    return subprocess.Popen([sys.executable, "-m", "onnxpipe", *args], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def run(*args: str) -> tuple[int, str]:
    proc = onnxpipe(*args)
    out, _ = proc.communicate(timeout=JOB_TIMEOUT_S)
    return proc.returncode, out
