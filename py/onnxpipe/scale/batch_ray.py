"""A batch job's records on Ray Data: a dataset of one record per block, ``map_batches`` with
``RecordWorker`` as the callable class on a fixed pool of actors (each loads the bundle once and
holds ``threads`` CPUs), the results streamed back to this process, which writes the outputs and
the manifest (batch_job.py). Nothing but Ray Data schedules the records.

A node that dies takes its actors with it: Ray Data restarts them (max_restarts -1) and sends
their unfinished records again (max_task_retries -1), so the job still ends with every record.
``AttemptLog`` (one small actor on this node) hears of each record as a worker starts it, which
is how the manifest tells which records were retried.
"""

from __future__ import annotations

import uuid
from typing import Iterator

from ..errors import EngineError
from .batch_work import RecordWorker
from .ray_runtime import cluster_cpus

TASKS_IN_FLIGHT = 2   # per actor: enough to hide a record's hand-over, few to redo when a node dies


def attempt_log(ray):
    """The AttemptLog actor class (made when Ray is there: this module imports without it)."""

    @ray.remote(num_cpus=0)
    class AttemptLog:
        def __init__(self):
            self.counts: dict[str, int] = {}

        def begin(self, key: str) -> int:
            self.counts[key] = self.counts.get(key, 0) + 1
            return self.counts[key]

        def get(self) -> dict[str, int]:
            return dict(self.counts)

    return AttemptLog


class RayRun:
    """Runs rows on a Ray Data actor pool of ``concurrency`` actors; ``results()`` yields
    (key, status, output bytes, entry JSON) as records finish, ``attempts()`` the count per key."""

    def __init__(self, ray, command: str, bundle: str, concurrency: int, threads: int, leave: bool = False):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ray, self.command, self.bundle, self.leave = ray, command, bundle, leave
        self.concurrency, self.threads = concurrency, threads
        here = ray.get_runtime_context().get_node_id()
        self.log = attempt_log(ray).options(
            name=f"onnxpipe-batch-attempts-{uuid.uuid4().hex[:12]}",
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote()

    def check_room(self) -> str | None:
        """A warning when the cluster has fewer CPUs than the pool asks (it waits for more)."""
        cpus, want = cluster_cpus(self.ray), self.concurrency * self.threads
        if cpus < want:
            return (f"--concurrency {self.concurrency} x --threads {self.threads} asks {want} CPUs; the cluster "
                    f"has {cpus:g} now: the pool waits for nodes to join")
        return None

    def results(self, rows: list[dict]) -> Iterator[tuple[str, str, bytes, str]]:
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False   # batch_job.py prints each record as it lands
        ds = ray.data.from_items(rows, override_num_blocks=len(rows))   # one record per task: a retry redoes one
        ds = ds.map_batches(
            RecordWorker, batch_size=1, num_cpus=self.threads,
            compute=ray.data.ActorPoolStrategy(size=self.concurrency,
                                               max_tasks_in_flight_per_actor=TASKS_IN_FLIGHT),
            fn_constructor_kwargs={"command": self.command, "bundle": self.bundle, "threads": self.threads,
                                   "attempts": self.log})
        try:
            for row in ds.iter_rows():
                yield str(row["key"]), str(row["status"]), bytes(row["output"]), str(row["entry"])
        except self.ray.exceptions.RayError as exc:   # records fail alone: this is the pool itself
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            what = "its actors could not load the bundle" if getattr(exc, "actor_init_failed", False) else "it failed"
            raise EngineError(f"the Ray Data job stopped: {what}: {lines[-1] if lines else type(exc).__name__}") from None

    def attempts(self) -> dict[str, int]:
        return self.ray.get(self.log.get.remote())

    def close(self) -> None:
        """Kill the attempt log; with ``leave``, disconnect: Ray forwards the workers' logs to
        this process until then, and they must not land after the job's own last line."""
        try:
            self.ray.kill(self.log)
        finally:
            if self.leave:
                self.ray.shutdown()
