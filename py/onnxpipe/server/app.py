"""The routes: OpenAI's /v1 endpoints over the served bundles, /health and /metrics."""

from __future__ import annotations

import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from . import speech, transcription
from .chat import GenerateCall, chat_call, completion_call
from ..errors import OnnxpipeError
from ..pipeline.text_generation import DEFAULT_MAX_NEW_TOKENS
from .errors import APIError, bad_request, from_runtime
from .metrics import CONTENT_TYPE, Metrics
from .models import Registry
from .plumbing import BodyLimit, ClientGone, json_body, next_item
from .replies import Replies
from .batch_scheduler import TextRequest
from .scheduler import Done

log = logging.getLogger("onnxpipe.server")


@dataclass(frozen=True)
class Limits:
    max_concurrent: int = 1        # sequences one batchable decoder bundle decodes at once (batch rows)
    max_queue: int = 16            # requests that may wait per bundle; more answer 429
    max_tokens: int = 4096         # the most new tokens a request may ask for (the default stays 256)
    max_upload_mb: float = 25.0    # the largest request body, JSON or upload (413 above)


def create_app(registry: Registry, metrics: Metrics, limits: Limits) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app):
        yield
        registry.close()   # queued requests are cancelled, the workers end

    app = FastAPI(title="onnxpipe", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.registry, app.state.metrics, app.state.limits = registry, metrics, limits

    def count(request: Request, status: int) -> None:
        metrics.count(request.url.path, getattr(request.state, "model", ""), status)

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError):
        count(request, exc.status)
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        error = APIError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", None,
                         "not_found" if exc.status_code == 404 else None)
        return await api_error(request, error)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):
        log.exception("%s %s failed", request.method, request.url.path)
        return await api_error(request, from_runtime(exc))

    @app.get("/health")
    async def health():
        return {"status": "ok", "models": {m.id: m.scheduler.stats() for m in registry.models.values()}}

    @app.get("/metrics")
    async def prometheus():
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [m.card() for m in registry.models.values()]}

    @app.get("/v1/models/{model_id}")
    async def one_model(model_id: str):
        model = registry.models.get(model_id)
        if model is None:
            raise APIError(404, f"model {model_id!r} is not served here (models: {', '.join(registry.models)})",
                           "model", "model_not_found")
        return model.card()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await generate(request, chat_call(await json_body(request)), "/v1/chat/completions")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await generate(request, completion_call(await json_body(request)), "/v1/completions")

    async def generate(request: Request, call: GenerateCall, endpoint: str):
        start = time.perf_counter()
        model = registry.get(call.model, "text", endpoint)
        request.state.model = model.id
        asked = call.options.get("max_new_tokens")
        if asked is not None and asked > limits.max_tokens:
            field = call.max_tokens_field
            raise bad_request(f"{field}: this server gives at most {limits.max_tokens} new tokens (--max-tokens), "
                              f"found {asked}", field)
        if asked is None and limits.max_tokens < DEFAULT_MAX_NEW_TOKENS:
            call.options["max_new_tokens"] = limits.max_tokens   # else the runtime's default applies
        if model.scheduler.batching:   # a row of the bundle's batch: the worker prepares it
            submission = model.scheduler.submit(TextRequest(call.options, call.messages, call.prompt))
        else:
            submission = model.scheduler.submit(text_job(call))
        replies = Replies(call, model.id)
        first_token = [True]

        def seen(item) -> None:
            """Metrics of an item: the first token's time, the tokens of the result."""
            if first_token[0] and (isinstance(item, Done) or item.token_ids):
                first_token[0] = False
                metrics.time_to_first_token.labels(model.id).observe(time.perf_counter() - start)
            if isinstance(item, Done):
                metrics.generated(model.id, item.result.prompt_tokens, len(item.result.tokens))

        first = await waited(request, submission)   # errors before any output keep their status
        seen(first)
        if not call.stream:
            item = first
            while not isinstance(item, Done):
                item = await waited(request, submission)
                seen(item)
            count(request, 200)
            return replies.whole(checked(item.result))

        async def events():
            status = 499
            try:
                for chunk in replies.first():
                    yield json.dumps(chunk)
                item = first
                while True:
                    if isinstance(item, Done):
                        for chunk in replies.last(checked(item.result)):
                            yield json.dumps(chunk)
                        break
                    for chunk in replies.text(item):
                        yield json.dumps(chunk)
                    item = await submission.__anext__()
                    seen(item)
                yield "[DONE]"
                status = 200
            except APIError as exc:
                status = exc.status
                yield json.dumps(exc.body())
            except Exception as exc:   # noqa: BLE001 - the headers are gone: the error goes in the stream
                error = from_runtime(exc)
                status = error.status
                yield json.dumps(error.body())
            finally:
                submission.cancel()   # a client that left stops the generation at its next step
                count(request, status)

        return EventSourceResponse(events())

    @app.post("/v1/audio/speech")
    async def audio_speech(request: Request):
        call = speech.speech_call(await json_body(request))
        model = registry.get(call.model, "speech", "/v1/audio/speech")
        request.state.model = model.id
        controls = speech.controls_of(model.pipe, call)
        rate = model.pipe.spec.pipeline.output.audio.sample_rate
        submission = model.scheduler.submit(speech.speak_job(call.input, controls))
        first = await waited(request, submission)

        async def audio():
            status = 499
            try:
                if call.format == "wav":
                    yield speech.streamed_wav_header(rate)
                item, whole = first, []
                while not isinstance(item, Done):
                    if call.format == "flac":
                        whole.append(item)   # sent whole: the FLAC header states the length
                    else:
                        yield speech.pcm16(item)
                    item = await submission.__anext__()
                if call.format == "flac":
                    yield await run_in_threadpool(speech.flac, whole, rate)
                status = 200
            except Exception:   # noqa: BLE001 - the headers are gone: the stream ends short
                log.exception("speech for %s failed mid-stream", model.id)
                status = 500
            finally:
                submission.cancel()
                count(request, status)

        headers = {"x-sample-rate": str(rate), "x-accel-buffering": "no"}   # proxies: pass each sentence on
        return StreamingResponse(audio(), media_type=speech.FORMATS[call.format], headers=headers)

    @app.post("/v1/audio/transcriptions")
    async def audio_transcriptions(request: Request):
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise bad_request("expected a multipart/form-data body {file, model, response_format?}")
        async with request.form() as form:
            model_name, fmt = transcription.check_form(form)
            model = registry.get(model_name, "transcription", "/v1/audio/transcriptions")
            request.state.model = model.id
            # decoding a long WAV takes seconds in pure Python: off the event loop
            samples, rate = await run_in_threadpool(transcription.mono, await form["file"].read())
        submission = model.scheduler.submit(transcription.transcribe_job(samples, rate))
        item = await waited(request, submission)
        while not isinstance(item, Done):
            item = await waited(request, submission)
        body, media = transcription.formatted(checked(item.result), fmt)
        count(request, 200)
        if isinstance(body, dict):
            return JSONResponse(body)
        return PlainTextResponse(body, media_type=media)

    return app


async def waited(request: Request, submission):
    """The next item of a submission; a client that left is a 499, the job's own error an APIError."""
    try:
        return await next_item(submission, request)
    except ClientGone:
        raise APIError(499, "the client closed the connection", None, "client_closed_request") from None
    except APIError:
        raise
    except Exception as exc:   # noqa: BLE001 - the runtime's refusal becomes the request's error object
        if not isinstance(exc, OnnxpipeError):
            log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        raise from_runtime(exc) from None


def checked(result):
    """A job's result; one that ended "cancelled" is the 499 of a client that left."""
    if result.finish_reason == "cancelled":
        raise APIError(499, "the request was cancelled", None, "client_closed_request")
    return result


def text_job(call: GenerateCall):
    """The scheduler job of a chat or completion request: each stream event is emitted."""
    def job(pipe, emit, cancelled):
        if call.messages is not None:
            return pipe.chat(call.messages, on_event=emit, cancel=cancelled, **call.options)
        return pipe.generate(call.prompt, on_event=emit, cancel=cancelled, **call.options)
    return job


def build(bundles: list[str], limits: Limits, load=None):
    """Load ``bundles`` (folders, or ID=FOLDER) and make the app; returns (the ASGI app to serve:
    the FastAPI app behind the body limit, the FastAPI app). ``load`` defaults to onnxpipe.load."""
    from ..api import load as load_bundle
    from .models import model_id

    load = load or load_bundle
    metrics, registry = Metrics(), Registry()
    for spec in bundles:
        name, path = model_id(spec)
        pipe = load(path)
        for warning in pipe.warnings:
            log.warning("%s: %s", name, warning)
        registry.add(name, path, pipe, scheduler_for(name, pipe, limits, metrics))
    app = create_app(registry, metrics, limits)
    return BodyLimit(app, int(limits.max_upload_mb * 2 ** 20)), app


def loader(threads: int | None):
    """onnxpipe.load with each session on ``threads`` intra-op threads (None: onnxruntime's default,
    one per core): what ``serve --threads`` and each Ray Serve replica load bundles with."""
    from ..api import load as load_bundle
    from ..backends.native import NativeBackend

    def load(path):
        return load_bundle(path, backend=NativeBackend(threads=threads))
    return load


def scheduler_for(name: str, pipe, limits: Limits, metrics):
    """A BatchScheduler for a text bundle whose state batchable() accepts when --max-concurrent > 1;
    else the one-at-a-time Scheduler, with the reason /v1/models shows."""
    from ..loops.batched import batchable
    from .batch_scheduler import BatchScheduler
    from .scheduler import Scheduler

    if pipe.kind != "text":
        return Scheduler(name, pipe, limits.max_queue, metrics,
                         f"one sequence at a time: a {pipe.kind} bundle runs one request at a time; "
                         f"batching is for decoder (text) bundles")
    why = batchable(pipe)
    if why is not None:
        reason = f"one sequence at a time: {why}"
        if limits.max_concurrent > 1:
            log.warning("%s runs one sequence at a time (batching: false), not --max-concurrent %d: %s",
                        name, limits.max_concurrent, why)
        return Scheduler(name, pipe, limits.max_queue, metrics, reason)
    if limits.max_concurrent <= 1:
        return Scheduler(name, pipe, limits.max_queue, metrics,
                         "one sequence at a time: --max-concurrent 1 (give more to batch this bundle's requests)")
    return BatchScheduler(name, pipe, limits.max_queue, limits.max_concurrent, metrics)


def serve(bundles: list[str], limits: Limits, host: str, port: int, threads: int | None = None) -> None:
    """Load ``bundles`` (their sessions on ``threads`` intra-op threads; None: onnxruntime's
    default) and serve them with uvicorn until interrupted."""
    import uvicorn

    asgi, _ = build(bundles, limits, loader(threads))
    uvicorn.run(asgi, host=host, port=port, log_level="info")
