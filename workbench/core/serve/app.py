"""The Starlette app: OpenAI's chat and completion endpoints, models, health and metrics, over the engine's slots."""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from workbench.core.config.web_boundary import WebBoundary
from workbench.core.engine.events import EngineFailed
from workbench.core.engine.sequence_events import (
    SequenceAccepted,
    SequenceFinished,
    SequenceRejected,
    SequenceTokens,
)
from workbench.core.serve.admission import Admission
from workbench.core.serve.browser_guard import BrowserGuard
from workbench.core.serve.openai_requests import (
    MAX_BODY_BYTES,
    ApiError,
    ApiRequest,
    chat_request,
    completion_request,
    parse_json_body,
)
from workbench.core.serve.server_metrics import ServerMetrics

RESTART_RETRY_AFTER_S = 5
_FINISH_REASONS = {"stop": "stop", "length": "length"}
LOOPBACK_ONLY = WebBoundary()  # a server on 127.0.0.1: its loopback names, no other page origin


@dataclass(frozen=True)
class ServerConfig:
    model_name: str  # what /v1/models lists and answers carry
    api_key: str | None
    queue_limit: int
    boundary: WebBoundary = LOOPBACK_ONLY  # the Host names and page origins answered


def create_app(host: Any, config: ServerConfig, *, telemetry: Any = None) -> Starlette:
    """The ASGI app over `host` (a ServingEngine). Blocking work never runs on the event loop."""
    admission = Admission(host.n_slots, config.queue_limit)
    metrics = ServerMetrics(admission, host, telemetry)
    api = _Api(host, config, admission, metrics)
    routes = [
        Route("/v1/chat/completions", api.chat, methods=["POST"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/health", api.health, methods=["GET"]),
        Route("/metrics", api.metrics, methods=["GET"]),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(BrowserGuard, boundary=config.boundary)])
    app.state.admission = admission
    app.state.metrics = metrics
    return app


class _Api:
    def __init__(self, host: Any, config: ServerConfig, admission: Admission, metrics: ServerMetrics) -> None:
        self._host = host
        self._config = config
        self._admission = admission
        self._metrics = metrics

    # -- endpoints ---------------------------------------------------------------------------
    async def chat(self, request: Request) -> Response:
        return await self._guarded(request, "chat", lambda body: self._generate(request, chat_request(body), "chat"))

    async def completions(self, request: Request) -> Response:
        return await self._guarded(request, "completions",
                                   lambda body: self._generate(request, completion_request(body), "completions"))

    async def models(self, request: Request) -> Response:
        async def answer(_body: Any) -> Response:
            created = int(time.time())
            model = {"id": self._config.model_name, "object": "model", "created": created, "owned_by": "workbench"}
            return JSONResponse({"object": "list", "data": [model]})
        return await self._guarded(request, "models", answer, read_body=False)

    async def health(self, request: Request) -> Response:
        async def answer(_body: Any) -> Response:
            host = self._host
            stuck = host.stuck()
            state = "stuck" if stuck else host.state
            body = {"status": "ok" if state == "ready" else state, "engine_pid": host.pid,
                    "slots": host.n_slots, "slots_busy": self._admission.running, "queued": self._admission.waiting,
                    "restarts": host.restarts, "last_failure": host.last_failure or None}
            if stuck:
                body["reason"] = stuck
            if state != "ready":
                return JSONResponse(body, status_code=503, headers={"Retry-After": str(RESTART_RETRY_AFTER_S)})
            return JSONResponse(body)
        return await self._guarded(request, "health", answer, read_body=False)

    async def metrics(self, request: Request) -> Response:
        async def answer(_body: Any) -> Response:
            text = await asyncio.to_thread(self._metrics.exposition)
            return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")
        return await self._guarded(request, "metrics", answer, read_body=False)

    # -- the common path -----------------------------------------------------------------------
    async def _guarded(self, request: Request, endpoint: str, answer: Any, *, read_body: bool = True) -> Response:
        try:
            self._authorize(request)
            body = await _read_json(request) if read_body else None
            response = await answer(body)
        except ApiError as error:
            response = JSONResponse(error.body(), status_code=error.status, headers=error.headers)
        self._metrics.requests.labels(endpoint=endpoint, status=str(response.status_code)).inc()
        return response

    def _authorize(self, request: Request) -> None:
        key = self._config.api_key
        if key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
            raise ApiError(401, "a valid API key is needed: send 'Authorization: Bearer <key>'",
                           kind="authentication_error", code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})

    async def _generate(self, request: Request, api: ApiRequest, kind: str) -> Response:
        if self._host.state != "ready":
            raise ApiError(503, f"the engine is {self._host.state} (last failure: {self._host.last_failure or 'none'}); try again shortly",
                           kind="server_error", code="engine_unavailable", headers={"Retry-After": str(RESTART_RETRY_AFTER_S)})
        ticket = self._admission.try_enter()
        if ticket is None:
            retry = self._admission.retry_after_s()
            raise ApiError(429, f"all {self._admission.n_slots} slots and {self._admission.queue_limit} queue places are taken; "
                           f"retry in {retry} s", kind="rate_limit_error", code="queue_full", headers={"Retry-After": str(retry)})
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[object] = asyncio.Queue()

        def on_event(event: object) -> None:  # the engine's reader thread
            self._admission.observe(ticket, event)
            self._metrics.observe(getattr(event, "request_id", -1), event)
            loop.call_soon_threadsafe(events.put_nowait, event)

        handle = self._host.submit(api.request, on_event)
        if handle is None:
            self._admission.leave(ticket)
            raise ApiError(503, "the engine is restarting; try again shortly", kind="server_error",
                           code="engine_unavailable", headers={"Retry-After": str(RESTART_RETRY_AFTER_S)})
        first = await _first_event(request, handle, events)
        if first is None:
            return Response(status_code=499)  # the client left while the request waited for the engine
        if isinstance(first, SequenceRejected):
            raise ApiError(400, first.message, code="context_length_exceeded" if first.kind == "too_long" else None,
                           param="messages" if kind == "chat" else "prompt")
        if isinstance(first, EngineFailed):
            raise _unavailable(first)
        assert isinstance(first, SequenceAccepted), first
        answer = _Answer(kind, self._config.model_name, first.prompt_tokens)
        if api.stream:
            return _CancellingStream(self._stream(handle, events, answer, api.include_usage), handle.cancel,
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return await self._whole(request, handle, events, answer)

    async def _whole(self, request: Request, handle: Any, events: asyncio.Queue, answer: "_Answer") -> Response:
        disconnected = asyncio.ensure_future(_until_disconnect(request))
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait({getter, disconnected}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    handle.cancel()  # the client is gone: its slot and cells are freed at the next step
                    return Response(status_code=499)
                event = getter.result()
                if isinstance(event, SequenceFinished):
                    if event.stop_reason == "error":
                        raise ApiError(500, "decoding failed in the engine", kind="server_error")
                    return JSONResponse(answer.whole(event))
                if isinstance(event, EngineFailed):
                    raise _unavailable(event)
        finally:
            disconnected.cancel()

    async def _stream(self, handle: Any, events: asyncio.Queue, answer: "_Answer", include_usage: bool) -> AsyncIterator[str]:
        finished = False
        try:
            yield _sse(answer.chunk(role=True))
            while True:
                event = await events.get()
                if isinstance(event, SequenceTokens) and event.text:
                    yield _sse(answer.chunk(text=event.text))
                elif isinstance(event, SequenceFinished):
                    finished = True
                    if event.stop_reason == "error":
                        yield _sse(ApiError(500, "decoding failed in the engine", kind="server_error").body())
                        return
                    yield _sse(answer.chunk(finish=_FINISH_REASONS.get(event.stop_reason, "stop")))
                    if include_usage:
                        yield _sse(answer.usage_chunk(event))
                    yield "data: [DONE]\n\n"
                    return
                elif isinstance(event, EngineFailed):
                    finished = True
                    yield _sse(_unavailable(event).body())
                    return
        finally:
            if not finished:
                handle.cancel()  # the client disconnected (the generator was cancelled): free the slot


class _CancellingStream(StreamingResponse):
    """A stream that cancels its request however the response ends: a client gone before the first
    chunk never starts the body generator, so the generator's own cleanup would not run."""

    def __init__(self, content: Any, cancel: Any, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._cancel = cancel

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._cancel()  # harmless after a finished answer: the engine ignores an id it no longer holds


class _Answer:
    """OpenAI's response shapes for one request (chat or text completion)."""

    def __init__(self, kind: str, model: str, prompt_tokens: int) -> None:
        self.kind = kind
        self.model = model
        self.prompt_tokens = prompt_tokens
        self.id = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())

    def _usage(self, finished: SequenceFinished) -> dict[str, int]:
        return {"prompt_tokens": finished.prompt_tokens, "completion_tokens": finished.generated_tokens,
                "total_tokens": finished.prompt_tokens + finished.generated_tokens}

    def whole(self, finished: SequenceFinished) -> dict[str, Any]:
        reason = _FINISH_REASONS.get(finished.stop_reason, "stop")
        if self.kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": finished.text}, "finish_reason": reason, "logprobs": None}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": finished.text, "finish_reason": reason, "logprobs": None}
            kind = "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model, "choices": [choice],
                "usage": self._usage(finished)}

    def chunk(self, *, role: bool = False, text: str = "", finish: str | None = None) -> dict[str, Any]:
        if self.kind == "chat":
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else ({"content": text} if text else {})
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            kind = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
            kind = "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model, "choices": [choice]}

    def usage_chunk(self, finished: SequenceFinished) -> dict[str, Any]:
        chunk = self.chunk()
        chunk["choices"] = []
        chunk["usage"] = self._usage(finished)
        return chunk


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


def _unavailable(failure: EngineFailed) -> ApiError:
    if failure.kind == "crash":
        message = f"the engine stopped while answering ({failure.message}); it is being restarted, try again shortly"
    else:
        message = f"the engine could not answer: {failure.message}"
    return ApiError(503, message, kind="server_error", code="engine_unavailable",
                    headers={"Retry-After": str(RESTART_RETRY_AFTER_S)})


async def _read_json(request: Request) -> dict[str, Any]:
    # A page on another site may POST text/plain (or a form) without the browser asking first
    # (a "simple" request); application/json from a page needs a CORS preflight, which fails.
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(415, f"the request body must be sent as Content-Type: application/json, not "
                       f"{media_type[:60] or 'none'!r}", code="unsupported_media_type")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise ApiError(413, f"the request body may have at most {MAX_BODY_BYTES} bytes (Content-Length: {declared[:20]})",
                       code="body_too_large")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ApiError(413, f"the request body may have at most {MAX_BODY_BYTES} bytes", code="body_too_large")
            chunks.append(chunk)
    except ClientDisconnect:  # the client left, or its body was not read in time: no one reads the answer
        raise ApiError(400, "the connection closed before the request body arrived", code="incomplete_body") from None
    return parse_json_body(b"".join(chunks))


async def _first_event(request: Request, handle: Any, events: asyncio.Queue) -> object | None:
    """The request's first event; None (and the request cancelled) when its client leaves first."""
    disconnected = asyncio.ensure_future(_until_disconnect(request))
    getter = asyncio.ensure_future(events.get())
    try:
        done, _ = await asyncio.wait({getter, disconnected}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        disconnected.cancel()
    if getter in done:
        return getter.result()
    getter.cancel()
    handle.cancel()  # an engine that does not answer the cancel is killed (EngineLink.cancel)
    return None


async def _until_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
