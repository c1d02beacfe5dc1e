"""The OpenAI-compatible HTTP app (Starlette) in front of one ``LLMEngine``.

Routes::

    POST /v1/completions        text completions, streamed (SSE) or not
    POST /v1/chat/completions   chat completions (the model's chat template), streamed or not
    GET  /v1/models             the served model name(s);  GET /v1/models/{id}
    GET  /health                200 while the engine thread runs and the warm-up is done,
                                else 503
    GET  /metrics               Prometheus exposition (see metrics.py)

Every client mistake (malformed JSON, wrong types, out-of-range sampling values, unknown model,
prompt too long) is answered 400 with OpenAI's error body ``{"error": {"message", "type":
"invalid_request_error", "param", "code"}}``; unknown paths 404, wrong methods 405 and bodies
that are not JSON 415 in the same shape. Anything unexpected is logged with its traceback and
answered 500 in the same shape (``type`` "server_error"), on a connection that stays open. A
request whose client disconnects is aborted at once, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from promptcache.errors import ConfigError, EngineError, InvalidRequestError, RequestFieldError

from .async_engine import AsyncEngine, RequestStream
from .auth import BearerAuth, validate_api_key
from .metrics import CONTENT_TYPE, EngineMetrics
from .protocol import ServingContext, parse_chat_request, parse_completion_request
from .responses import TokenTexts
from .serving import ResponseMeta, chat_body, chat_events, completion_body, completion_events
from .sse import EventStreamResponse

if TYPE_CHECKING:
    from ..kv_events import KVEventPublisher
    from ..llm_engine import LLMEngine
    from .warmup import WarmupReport, WarmupRequest

__all__ = ["MAX_BODY_BYTES", "create_app", "is_json_media_type"]

logger = logging.getLogger(__name__)

#: Larger request bodies get HTTP 413.
MAX_BODY_BYTES = 32 * 1024 * 1024

#: The routes, for the 404 and 405 answers.
SERVED_ROUTES = (
    "POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /v1/models/{id}, "
    "GET /health and GET /metrics"
)

T = TypeVar("T")

#: Status for a client that disconnected before its answer was ready (nobody reads it; 499 is
#: nginx's "client closed request", so access logs tell it apart).
CLIENT_CLOSED_REQUEST = 499


@dataclass
class _State:
    engine: AsyncEngine
    metrics: EngineMetrics
    ctx: ServingContext
    texts: TokenTexts
    created: int
    by_tier: bool = False


def create_app(
    engine: LLMEngine,
    *,
    served_model_names: Sequence[str] | None = None,
    chat_template: str | None = None,
    api_key: str | None = None,
    kv_events: KVEventPublisher | None = None,
    warmup: list[WarmupRequest] | None = None,
    on_warmup_done: Callable[[WarmupReport | BaseException], None] | None = None,
) -> Starlette:
    """Build the app; its lifespan starts and stops the engine thread.

    Args:
        engine: a loaded engine; the app's thread owns it from start-up on.
        served_model_names: names clients send as ``model``; default: the engine's model path.
            The first one is listed first by ``/v1/models``.
        chat_template: Jinja source that replaces (or supplies) the model's chat template.
        api_key: if set, ``/v1`` requests must send ``Authorization: Bearer <api_key>``.
        kv_events: publish the prefix cache's KV events (vLLM format) here, once per engine
            step; the caller owns (and closes) the publisher.
        warmup: requests to prefill before serving (`promptcache.engine.server.warmup`);
            ``/health`` answers 503 until they are done.
        on_warmup_done: called (on the engine thread) with the warm-up's report or error.

    Raises:
        ConfigError: an empty model name, or an API key that no client could send
            (``validate_api_key``).
        ModelLoadError: the chat template does not compile.
    """
    names = tuple(served_model_names or (engine.config.model,))
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ConfigError("served_model_names must be non-empty strings")
    if api_key is not None:
        validate_api_key(api_key)
    if chat_template is not None:
        engine.tokenizer.set_chat_template(chat_template)
    async_engine = AsyncEngine(
        engine, kv_events=kv_events, warmup=warmup, on_warmup_done=on_warmup_done
    )
    metrics = EngineMetrics(async_engine.stats, lambda: async_engine.num_requests_in_flight)
    async_engine.metrics = metrics
    # Capped by the KV pool too: prompts and default max_tokens are sized to what can finish.
    max_model_len = engine.effective_max_model_len
    state = _State(
        engine=async_engine,
        metrics=metrics,
        ctx=ServingContext(
            model_names=names,
            tokenizer=engine.tokenizer,
            max_model_len=max_model_len,
            vocab_size=engine.model_config.vocab_size,
            max_num_seqs=engine.config.max_num_seqs,
        ),
        texts=TokenTexts(engine.tokenizer),
        created=int(time.time()),
        by_tier=engine.kv_tiers is not None,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async_engine.start()
        try:
            yield
        finally:
            await asyncio.to_thread(async_engine.stop)

    app = Starlette(
        routes=[
            Route("/v1/completions", _completions, methods=["POST"]),
            Route("/v1/chat/completions", _chat_completions, methods=["POST"]),
            Route("/v1/models", _models, methods=["GET"]),
            Route("/v1/models/{model:path}", _model, methods=["GET"]),
            Route("/health", _health, methods=["GET"]),
            Route("/metrics", _metrics, methods=["GET"]),
        ],
        exception_handlers={
            InvalidRequestError: _invalid_request,
            EngineError: _engine_error,
            HTTPException: _http_error,
        },
        middleware=[
            Middleware(_CatchAll),
            *([Middleware(BearerAuth, api_key=api_key)] if api_key is not None else []),
        ],
        lifespan=lifespan,
    )
    app.state.server = state
    return app


def _state(request: Request) -> _State:
    state: _State = request.app.state.server
    return state


# Generation -------------------------------------------------------------------------------------


async def _completions(request: Request) -> Response:
    state = _state(request)
    req = parse_completion_request(await _json_body(request), state.ctx)
    meta = ResponseMeta(f"cmpl-{uuid.uuid4().hex}", int(time.time()), req.model, state.by_tier)
    stream = await state.engine.add_request(
        req.prompts, req.params, cache_salt=req.cache_salt, request_id=meta.request_id
    )
    if req.stream:
        return EventStreamResponse(
            completion_events(req, stream, meta, state.texts), on_close=stream.abort
        )
    body = await _unless_disconnected(
        request, stream, completion_body(req, stream, meta, state.texts)
    )
    return Response(status_code=CLIENT_CLOSED_REQUEST) if body is None else JSONResponse(body)


async def _chat_completions(request: Request) -> Response:
    state = _state(request)
    req = parse_chat_request(await _json_body(request), state.ctx)
    meta = ResponseMeta(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), req.model, state.by_tier)
    stream = await state.engine.add_request(
        [req.prompt], req.params, cache_salt=req.cache_salt, request_id=meta.request_id
    )
    if req.stream:
        return EventStreamResponse(
            chat_events(req, stream, meta, state.texts), on_close=stream.abort
        )
    body = await _unless_disconnected(request, stream, chat_body(req, stream, meta, state.texts))
    return Response(status_code=CLIENT_CLOSED_REQUEST) if body is None else JSONResponse(body)


def is_json_media_type(content_type: str | None) -> bool:
    """True if a request with this ``Content-Type`` header may carry the JSON body.

    Accepted: no header (or an empty one), ``application/json`` and any ``application/*+json``
    type (RFC 6839), in any letter case and with any parameters (``; charset=utf-8``). Everything
    else (``text/plain``, ``application/x-www-form-urlencoded``, what ``curl -d`` sends by
    default...) is refused, as vLLM refuses anything but ``application/json``.
    """
    if content_type is None or not content_type.strip():
        return True
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


async def _json_body(request: Request) -> Any:
    """The parsed JSON body; a non-JSON content type, malformed or too deeply nested JSON, or an
    oversized body is the client's error."""
    content_type = request.headers.get("content-type")
    if not is_json_media_type(content_type):
        raise HTTPException(
            415,
            f"Content-Type {content_type!r} is not supported: send the body as JSON with "
            "Content-Type: application/json (curl: -H 'Content-Type: application/json').",
        )
    too_large = HTTPException(
        413,
        f"the request body is larger than this server's limit of {MAX_BODY_BYTES} bytes "
        f"({MAX_BODY_BYTES // 2**20} MiB); send a smaller body",
    )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # a chunked body without a length is capped too
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        encoding = request.headers.get("content-encoding", "").strip()
        if encoding and encoding.lower() != "identity":  # JSON, perhaps, but compressed
            raise HTTPException(
                415,
                f"Content-Encoding {encoding!r} is not supported: this server does not "
                "decompress request bodies; send the JSON body uncompressed.",
            ) from exc
        if type(exc) is ValueError and "integer string conversion" in str(exc):
            # valid JSON, but Python converts no integer of more than 4300 digits (by default)
            # and its message tells the reader to call sys.set_int_max_str_digits
            raise RequestFieldError(
                "We could not read the JSON body of your request: it holds an integer of more "
                f"than {sys.get_int_max_str_digits()} digits, and no field takes a number that "
                "long. Send shorter numbers.",
                code="invalid_value",
            ) from None
        raise RequestFieldError(
            f"We could not parse the JSON body of your request ({exc}). Send a JSON object "
            "with Content-Type: application/json.",
            code="invalid_json",
        ) from exc
    except RecursionError:  # the decoder recurses once per nesting level
        raise RequestFieldError(
            "We could not parse the JSON body of your request: its arrays/objects are nested "
            "too deeply. Send a JSON object nested at most a few hundred levels deep.",
            code="invalid_json",
        ) from None


def _reject_constant(name: str) -> None:
    """NaN, Infinity and -Infinity are not JSON (RFC 8259), though Python would accept them."""
    raise ValueError(f"{name} is not a valid JSON value")


async def _unless_disconnected(
    request: Request, stream: RequestStream, work: Awaitable[T]
) -> T | None:
    """Await ``work``; if the client disconnects first, abort the engine request, return None.

    Starlette does not cancel a plain (non-streaming) handler when its client goes away, so
    without this a closed connection would keep generating and hold its KV blocks.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        task.cancel()
        return None
    finally:
        watcher.cancel()
        stream.abort()  # no-op once finished


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


# Models, health, metrics ------------------------------------------------------------------------


def _model_card(state: _State, name: str) -> dict[str, Any]:
    return {
        "id": name,
        "object": "model",
        "created": state.created,
        "owned_by": "promptcache",
        "max_model_len": state.ctx.max_model_len,
    }


async def _models(request: Request) -> Response:
    state = _state(request)
    return JSONResponse(
        {"object": "list", "data": [_model_card(state, n) for n in state.ctx.model_names]}
    )


async def _model(request: Request) -> Response:
    state = _state(request)
    name = request.path_params["model"]
    if name not in state.ctx.model_names:
        return _error(
            404,
            f"The model {name!r} does not exist",
            param="model",
            code="model_not_found",
        )
    return JSONResponse(_model_card(state, name))


async def _health(request: Request) -> Response:
    engine = _state(request).engine
    if engine.is_alive and not engine.ready.is_set():
        body: dict[str, str | int] = {"status": "warming up"}
        progress = engine.warmup_progress
        if progress is not None:
            body["prompts_prefilled"], body["prompts"] = progress
        return JSONResponse(body, status_code=503)
    if engine.is_alive:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "engine stopped"}, status_code=503)


async def _metrics(request: Request) -> Response:
    return Response(_state(request).metrics.render(), media_type=CONTENT_TYPE)


# Errors -------------------------------------------------------------------------------------------


def _error(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """OpenAI's error body (https://platform.openai.com/docs/guides/error-codes, checked
    2026-11-30)."""
    return JSONResponse(
        {"error": {"message": _utf8(message), "type": type_, "param": _utf8(param), "code": code}},
        status_code=status,
    )


def _utf8(text: str | None) -> str | None:
    """``text`` with any lone surrogate escaped, so the JSON body can always be UTF-8 encoded."""
    if text is None:
        return None
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


async def _invalid_request(request: Request, exc: Exception) -> Response:
    param = exc.param if isinstance(exc, RequestFieldError) else None
    code = exc.code if isinstance(exc, RequestFieldError) else None
    return _error(400, str(exc), param=param, code=code)


async def _engine_error(request: Request, exc: Exception) -> Response:
    logger.warning("engine error on %s: %s", request.url.path, exc)
    return _error(503, str(exc), type_="server_error")


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # registered for HTTPException only
        raise exc
    # 413 and 415 carry our own full messages; Starlette's 404 / 405 just "Not Found"...
    own = exc.status_code in (413, 415)
    message = exc.detail if own else f"{exc.detail}: {request.method} {request.url.path}"
    if exc.status_code in (404, 405):  # say what is served: an Anthropic or Responses client
        message += f"; this server serves {SERVED_ROUTES} (the OpenAI API)"
    code = "unsupported_media_type" if exc.status_code == 415 else None
    response = _error(exc.status_code, message, code=code)
    response.headers.update(exc.headers or {})
    return response


class _CatchAll:
    """Answer any exception a handler did not expect with OpenAI's 500 body, and log it.

    Starlette's own last resort answers plain-text "Internal Server Error" and re-raises, so
    uvicorn logs the error a second time and closes the keep-alive connection. This middleware
    sits inside it: the client gets ``{"error": {..., "type": "server_error"}}`` with an error id
    and no traceback, the log gets the traceback under the same id, and the connection stays
    open. An exception after the response has started (mid-stream) cannot be answered any more
    and is re-raised for uvicorn to log; a client that disconnected while sending its body is
    not an error.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except ClientDisconnect:
            if not started:  # nobody reads it; keeps uvicorn from logging a missing response
                await Response(status_code=CLIENT_CLOSED_REQUEST)(scope, receive, send)
        except Exception as exc:
            if started:
                raise
            error_id = uuid.uuid4().hex[:16]
            logger.error(
                "unexpected error %s answering %s %s",
                error_id,
                scope.get("method"),
                scope.get("path"),
                exc_info=exc,
            )
            response = _error(
                500,
                f"The server had an error while processing your request (error id {error_id}; "
                "the server log has the details). Retry, or report the error id to the "
                "server's operator.",
                type_="server_error",
            )
            await response(scope, receive, send)
