"""One scheduler per bundle: it owns the bundle's Pipeline and runs requests from a bounded queue
on ONE worker thread, one at a time (a Pipeline holds one sequence's state). Decoder bundles that
can be batched get server/batch_scheduler.py's BatchScheduler instead (--max-concurrent > 1).

The interface, which BatchScheduler shares:
``submit(job)`` -> a Submission, an async iterator of the job's events ending in its result;
``Submission.cancel()``; ``stats()``. A job is ``job(pipe, emit, cancelled) -> result``: it calls
``emit(event)`` as it goes and polls ``cancelled()`` (pipe.chat(cancel=...) does, every step).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any, Callable

from .errors import APIError

Job = Callable[[Any, Callable[[Any], None], Callable[[], bool]], Any]


class Done:
    """The last item a Submission yields: the job's result."""

    def __init__(self, result):
        self.result = result


class Submission:
    """A queued or running request: iterate it (async) for its events, then a Done; an exception
    the job raised is raised from the iteration. ``cancel()`` stops it at its next step (or
    before it starts when still queued)."""

    def __init__(self, job: Job, loop: asyncio.AbstractEventLoop):
        self.job = job
        self.loop = loop
        self.items: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self.submitted = time.perf_counter()
        self.finished = False
        self.withdraw: Callable[[], None] | None = None   # the scheduler's: leave its queue

    def cancel(self) -> None:
        self.cancelled.set()
        if self.withdraw is not None:
            self.withdraw()

    def push(self, item) -> None:
        """From the worker thread: hand an event (or the end) to the request's event loop."""
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:   # the loop is closed (the server stopped): nobody is listening
            pass

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.finished:
            raise StopAsyncIteration
        item = await self.items.get()
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        if isinstance(item, Done):
            self.finished = True
        return item

    async def result(self):
        """Skip the events; the job's result."""
        async for item in self:
            if isinstance(item, Done):
                return item.result
        raise APIError(499, "the request was cancelled")


def cancelled_while_queued() -> APIError:
    return APIError(499, "the request was cancelled while queued", None, "client_closed_request")


class RequestQueue:
    """What every scheduler shares: one bundle's bounded queue of waiting Submissions, guarded by
    one condition, with the 503 once closed, the client that leaves while queued, the queue-depth
    metric, and the worker thread (``_work``, the subclass's) started last."""

    def __init__(self, model_id: str, pipe, max_queue: int, metrics=None, thread_name: str = ""):
        self.model_id = model_id
        self.pipe = pipe
        self.max_queue = max_queue
        self.metrics = metrics
        self.waiting: deque[Submission] = deque()
        self.condition = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._work, name=thread_name or f"onnxpipe-{model_id}", daemon=True)
        self.thread.start()

    def _enqueue(self, work, full) -> Submission:
        """Queue ``work``; ``full()`` (under the lock) returns the 429's message, or None to admit."""
        submission = Submission(work, asyncio.get_running_loop())
        with self.condition:
            if self.closed:
                raise APIError(503, "the server is shutting down")
            message = full()
            if message is not None:
                raise APIError(429, message, None, "queue_full")
            self.waiting.append(submission)
            submission.withdraw = lambda: self._withdraw(submission)
            self._depth()
            self.condition.notify()
        return submission

    def _withdraw(self, submission: Submission) -> None:
        """A queued request whose client left gives its place up at once (a running one sees
        its cancelled flag at its next step)."""
        with self.condition:
            if submission not in self.waiting:
                return
            self.waiting.remove(submission)
            self._depth()
        submission.push(cancelled_while_queued())

    def _depth(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_depth.labels(self.model_id).set(len(self.waiting))

    def _work(self) -> None:
        raise NotImplementedError


class Scheduler(RequestQueue):
    """Runs one bundle's requests one at a time, in order, from a queue of at most ``max_queue``
    waiting requests (a fuller queue answers 429)."""

    batching = False
    batching_reason = "one sequence at a time: concurrent requests wait in the queue"

    def __init__(self, model_id: str, pipe, max_queue: int, metrics=None, reason: str | None = None):
        if reason is not None:   # why this bundle isn't batched (/v1/models says it)
            self.batching_reason = reason
        self.running: Submission | None = None
        super().__init__(model_id, pipe, max_queue, metrics)

    def submit(self, job: Job) -> Submission:
        """Queue ``job``; 429 when ``max_queue`` requests already wait."""
        def full():
            busy = self.running is not None or self.waiting
            if busy and len(self.waiting) >= self.max_queue:
                return (f"model {self.model_id!r} is busy: {len(self.waiting)} request(s) already "
                        f"wait (--max-queue {self.max_queue}); retry later")
            return None
        return self._enqueue(job, full)

    def stats(self) -> dict:
        with self.condition:
            return {"running": int(self.running is not None), "queued": len(self.waiting),
                    "max_queue": self.max_queue, "max_concurrent": 1}

    def close(self) -> None:
        with self.condition:
            self.closed = True
            for submission in self.waiting:
                submission.cancel()
            self.condition.notify()
        self.thread.join(timeout=5)

    def _work(self) -> None:
        while True:
            with self.condition:
                while not self.waiting and not self.closed:
                    self.condition.wait()
                if not self.waiting:
                    return
                submission = self.running = self.waiting.popleft()
                self._depth()
            try:
                if submission.cancelled.is_set():   # cancelled between withdraw's check and here
                    submission.push(cancelled_while_queued())
                else:
                    result = submission.job(self.pipe, submission.push, submission.cancelled.is_set)
                    submission.push(Done(result))
            except BaseException as exc:   # noqa: BLE001 - every failure goes back to its request
                submission.push(exc)
            finally:
                with self.condition:
                    self.running = None
