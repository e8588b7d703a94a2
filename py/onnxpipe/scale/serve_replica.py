"""One Ray Serve replica of ``onnxpipe serve``: the server's own app (server/app.py ``build``: the
Registry, one scheduler per bundle with its continuous batching, the routes) made once when the
replica starts, its bundles loaded then, and handed to Serve as the replica's ASGI app.

Imported only on Ray (it imports ray.serve at the top): serve_ray.py names it when it deploys.
"""

from __future__ import annotations

from ray import serve


@serve.deployment
@serve.ingress()
class OnnxpipeReplica:
    """``bundles``: absolute folders (or ID=FOLDER), the same on every node; ``limits``: the
    server's Limits; ``threads``: intra-op threads of each bundle's sessions (the CPUs the replica
    holds)."""

    def __init__(self, bundles: list[str], limits, threads: int):
        from ..server.app import build, loader

        self.asgi, self.fastapi = build(bundles, limits, load=loader(threads))

    def __serve_build_asgi_app__(self):
        return self.asgi

    def check_health(self):
        """Serve's health check: every bundle's scheduler thread must still run (a replica that
        fails it is replaced)."""
        for model in self.fastapi.state.registry.models.values():
            if not model.scheduler.thread.is_alive():
                raise RuntimeError(f"{model.id}: its scheduler thread stopped")
