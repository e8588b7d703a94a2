"""Continuous batching for a decoder bundle: concurrent requests share decode passes.

``BatchScheduler`` has the Scheduler's interface (``submit`` -> a Submission, ``stats``,
``close``; ``batching = True``) but what it is given is a ``TextRequest`` (the checked messages
or prompt and the pipe.chat / pipe.generate options), not a job closure: ONE worker thread owns
a loops/batched.py ``BatchedDecoder`` and, between steps, admits queued requests while fewer
than ``max_concurrent`` rows decode: it turns each into a Sequence and its Reply
(pipeline ``prepare_reply``), prefills it (``decoder.add``), then steps every active row at
once and pushes each row's StreamEvents to its Submission, ending with a Done(GenerationResult).
A row whose client left (``Submission.cancel``) ends at the next step and its slot takes the
next queued request; a request that fails to prepare (a bad schema, a prompt too long) gets its
error alone while the other rows go on. llama.cpp's server slots, one thread: docs/batching.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..loops.batched import BatchedDecoder
from .scheduler import Done, RequestQueue, Submission, cancelled_while_queued

log = logging.getLogger("onnxpipe.server")


@dataclass
class TextRequest:
    """A chat (``messages``) or completion (``prompt``) request: ``options`` are the keyword
    arguments pipe.chat / pipe.generate would take (server/chat.py's GenerateCall.options)."""

    options: dict = field(default_factory=dict)
    messages: list[dict] | None = None
    prompt: str | None = None

    def prepare(self, pipe, cancel):
        """(Sequence, Reply) of this request from an empty state; errors name the field."""
        if self.messages is not None:
            return pipe.conversation.prepare_reply(self.messages, cancel=cancel, **self.options)
        return pipe.generation.prepare_reply(self.prompt, cancel=cancel, **self.options)


class BatchScheduler(RequestQueue):
    """Decodes up to ``max_concurrent`` of one bundle's requests together; at most ``max_queue``
    more wait (a fuller queue answers 429)."""

    batching = True
    batching_reason = None

    def __init__(self, model_id: str, pipe, max_queue: int, max_concurrent: int, metrics=None):
        self.max_concurrent = max_concurrent
        self.decoder = BatchedDecoder(pipe, max_rows=max_concurrent)   # refuses a bundle batchable() refuses
        self.active: dict[int, tuple[Submission, object]] = {}   # id(sequence) -> (its Submission, its Reply)
        super().__init__(model_id, pipe, max_queue, metrics, f"onnxpipe-{model_id}-batch")

    def submit(self, request: TextRequest) -> Submission:
        """Queue ``request``; 429 when every slot is taken and ``max_queue`` requests already wait."""
        if not isinstance(request, TextRequest):
            raise TypeError(f"BatchScheduler.submit: expected a TextRequest, found {type(request).__name__}")

        def full():
            free = max(0, self.max_concurrent - len(self.active))
            if len(self.waiting) >= self.max_queue + free:
                return (f"model {self.model_id!r} is busy: {len(self.active)} request(s) decode "
                        f"(--max-concurrent {self.max_concurrent}) and {len(self.waiting)} wait "
                        f"(--max-queue {self.max_queue}); retry later")
            return None
        return self._enqueue(request, full)

    def stats(self) -> dict:
        with self.condition:
            return {"running": len(self.active), "queued": len(self.waiting),
                    "max_queue": self.max_queue, "max_concurrent": self.max_concurrent}

    def close(self) -> None:
        with self.condition:
            self.closed = True
            for submission in list(self.waiting):
                submission.cancel()
            for submission, _ in list(self.active.values()):
                submission.cancelled.set()   # the rows end at the next step
            self.condition.notify()
        self.thread.join(timeout=5)

    # ---- the worker thread ---------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self.condition:
                while not self.waiting and not self.active and not self.closed:
                    self.condition.wait()
                if self.closed and not self.waiting and not self.active:
                    self.decoder.close()
                    return
                admitted = []
                while self.waiting and len(self.active) + len(admitted) < self.max_concurrent:
                    admitted.append(self.waiting.popleft())
                self._depth()
            for submission in admitted:
                self._admit(submission)
            if self.decoder.rows:
                try:
                    made = self.decoder.step()
                except BaseException as exc:   # noqa: BLE001 - the batch's pass failed: every row gets it
                    log.error("%s: a batched step failed", self.model_id, exc_info=exc)
                    self._fail_all(exc)
                    continue
                self._deliver(made)

    def _admit(self, submission: Submission) -> None:
        """Prepare and prefill one request; its errors go back to it alone."""
        if submission.cancelled.is_set():
            submission.push(cancelled_while_queued())
            return
        try:
            seq, reply = submission.job.prepare(self.pipe, submission.cancelled.is_set)
        except BaseException as exc:   # noqa: BLE001 - a bad request fails alone
            submission.push(exc)
            return
        with self.condition:
            self.active[id(seq)] = (submission, reply)
        try:
            made = self.decoder.add(seq)
        except BaseException as exc:   # noqa: BLE001 - its prefill failed: the rows in the batch go on
            with self.condition:
                self.active.pop(id(seq), None)
            submission.push(exc)
            return
        self._deliver(made)

    def _deliver(self, made) -> None:
        """Each row's step -> its StreamEvent (pushed unless it is a cancel's) -> at the end its result."""
        for seq, step in made:
            entry = self.active.get(id(seq))
            if entry is None:
                continue
            submission, reply = entry
            try:
                event = reply.event(step)
                if event.finish_reason is None:
                    submission.push(event)
                    continue
                if event.finish_reason != "cancelled":   # as pipe.chat's on_event: a cancel brings nothing new
                    submission.push(event)
                result = reply.result()
            except BaseException as exc:   # noqa: BLE001 - this row's reply failed: it leaves, the others go on
                result = exc
                if any(s is seq for s in self.decoder.seqs):
                    self.decoder.remove(seq)
            with self.condition:
                self.active.pop(id(seq), None)
            submission.push(result if isinstance(result, BaseException) else Done(result))

    def _fail_all(self, exc: BaseException) -> None:
        self.decoder.close()
        with self.condition:
            rows, self.active = list(self.active.values()), {}
        for submission, _ in rows:
            submission.push(exc)
