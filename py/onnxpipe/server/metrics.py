"""Prometheus metrics (GET /metrics): requests, tokens, queue depth, time to first token."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """One registry per app, so two servers in one process (tests) keep their counts apart."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("onnxpipe_requests", "Requests answered, by endpoint, model and HTTP status",
                                ["endpoint", "model", "status"], registry=self.registry)
        self.tokens = Counter("onnxpipe_tokens", "Tokens processed: kind prompt (cached ones included) or completion",
                              ["model", "kind"], registry=self.registry)
        self.queue_depth = Gauge("onnxpipe_queue_depth", "Requests waiting for their model's worker",
                                 ["model"], registry=self.registry)
        self.time_to_first_token = Histogram(
            "onnxpipe_time_to_first_token_seconds", "From a request's arrival to its first generated token",
            ["model"], registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64))

    def count(self, endpoint: str, model: str, status: int) -> None:
        self.requests.labels(endpoint, model, str(status)).inc()

    def generated(self, model: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.tokens.labels(model, "prompt").inc(prompt_tokens)
        self.tokens.labels(model, "completion").inc(completion_tokens)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
