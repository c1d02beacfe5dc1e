"""``ProxyEndpoint``: forward one request to its upstream and record what happened.

One instance serves one vendor route (a pure ASGI app mounted by ``app.build_app``). Per request:

1. read the body (over ``max_body_bytes`` -> 413) and parse it (not JSON -> the vendor's 400);
2. pick the upstream (``ProxyConfig.select_upstream``) and open the upstream request with the
   client's exact body bytes (refused -> 502, timeout -> 504, both vendor-shaped); what the
   forwarding does not need (the request's id, its key fingerprint, the task that watches for
   the client going away) is done once the request went out, while the upstream works on it
   (``_after_send``);
3. relay the response chunk by chunk as it arrives (one message to the server per upstream
   read); an SSE stream's bytes are kept and decoded into events in batches of
   ``DECODE_BATCH_BYTES`` and after the last byte, their JSON read in batches of
   ``OBSERVE_BATCH_EVENTS`` (a stream the proxy edits, to drop the usage chunk it asked for, is
   decoded chunk by chunk); a task watches for the client going away and then cancels the
   relay, which closes the upstream request;
4. after the last byte went out, fill the ``RequestRecord`` (usage, cost, prefix hashes), run the
   record hooks and hand the row to the background writer. When the request is the only one in
   flight, the proxy first gives its CPU away once (``give_way``), so that a client on the same
   machine reads its response before this bookkeeping runs rather than after it; the row's
   ``ended_at`` and ``latency_ms`` are taken when the last byte went out either way.

With recording off (no ``--db`` and no hooks) steps 4 and the usage tee are skipped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.types import Receive, Scope, Send

from promptcache.errors import PromptCacheError, StoreError
from promptcache.fingerprint import (
    PromptTexts,
    RequestFingerprint,
    fingerprint_request,
    prompt_texts,
)
from promptcache.usage import API_HINT, UsageAccumulator, parse_usage, stream_accumulator

from . import json_decode
from .config import ProxyConfig, UpstreamConfig
from .diagnostics import (
    DIAGNOSABLE_APIS,
    VendorDiagnosis,
    VendorDiagnostics,
    add_previous_message_id,
    read_diagnosis,
    requested_comparison,
    response_id,
)
from .enrich import apply_usage, describe_prompt, response_model
from .forward import (
    UpstreamPool,
    UpstreamTimeoutError,
    UpstreamUnreachableError,
    describe_transport_error,
    request_headers,
    response_headers,
)
from .prefix_store import PrefixStore
from .record import RequestRecord, new_request_id
from .redact import client_secrets, key_fingerprint, redact_text
from .routing import Decision, Policy, RequestFacts
from .routing.router import Router
from .sse import ServerSentEvent, SSEDecoder
from .store import RequestStore
from .stream_options import (
    INJECTABLE_APIS,
    drop_injected_usage_chunk,
    inject_include_usage,
    needs_include_usage,
)
from .vendors import (
    GEMINI_ACTIONS,
    OWN_ROUTES,
    SUPPORTED_ROUTES,
    RouteSpec,
    error_body,
    error_message_of,
)

__all__ = ["REQUEST_ID_HEADER", "ProxyEndpoint", "ProxyState", "RecordHook"]

logger = logging.getLogger("promptcache.proxy")

#: JSON's names for the kinds of value json_decode.loads returns, for error messages.
_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}

#: Response header carrying the request's id (the ``id`` column of the log).
REQUEST_ID_HEADER = b"x-promptcache-request-id"

#: A record hook: called once per request with the finished record; must be fast, must not raise.
RecordHook = Callable[[RequestRecord], None]


@dataclass
class ProxyState:
    """What every endpoint shares: settings, upstream clients, the log and the record hooks."""

    config: ProxyConfig
    pool: UpstreamPool
    store: RequestStore | None
    record_hooks: list[RecordHook]
    salt: bytes
    #: upstreams that answered 400/422 to an injected ``stream_options``: never injected again
    no_usage_injection: set[str] = field(default_factory=set)
    #: URLs of upstreams whose last request failed to connect (their first failure is logged)
    unreachable: set[str] = field(default_factory=set)
    #: requests between arrival and their record's hand-off (shutdown waits for them)
    in_flight: int = 0
    #: upstream name -> its router, for upstreams with replicas
    routers: dict[str, Router] = field(default_factory=dict)
    #: ``--store-prefixes``: keeps the latest request body of each prefix family
    prefixes: PrefixStore | None = None
    #: ``--vendor-diagnostics``: names the previous response in Anthropic requests
    vendor_diagnostics: VendorDiagnostics | None = None

    @property
    def recording(self) -> bool:
        """Whether requests are recorded at all (a log file or at least one hook)."""
        return self.store is not None or bool(self.record_hooks)


class _BodyTooLargeError(Exception):
    pass


class _ClientGoneError(Exception):
    pass


@dataclass
class _Exchange:
    """Working state of one request."""

    record: RequestRecord | None
    started: float  # perf_counter() at arrival
    secrets: list[str] = field(default_factory=list)
    request_body: bytes = b""
    parsed: dict[str, Any] | None = None
    usage_api: str | None = None
    accumulator: UsageAccumulator | None = None
    strip_usage_chunk: bool = False
    response_copy: bytearray | None = None
    copy_truncated: bool = False
    first_byte: float | None = None
    finished: bool = False
    disconnected: bool = False
    stream_complete: bool = False  # the stream's terminal event was relayed
    stream_error: str | None = None  # the upstream's own error event, sent after a 200
    body_sent: bool = False  # the response's last body message went to the client
    ended: float | None = None  # perf_counter() when it did
    diagnosis: VendorDiagnosis | None = None  # the vendor's own cache diagnosis
    compared_with: str | None = None  # the previous response id the request names for it
    silence_is_no_divergence: bool = False  # an Anthropic upstream was asked to compare
    response_id: str | None = None  # the vendor's id of the response
    response_model: str | None = None  # the model the response names
    #: the prefix fingerprint, computed before forwarding when a router needs it (or after,
    #: from ``prompt``, or by the record)
    fingerprint: RequestFingerprint | None = None
    #: the prefix segments' texts, computed before forwarding for a router's chunks
    prompt: PromptTexts | None = None
    #: the response status line went to the client (from then on, never retried)
    response_started: bool = False
    #: the disconnect watcher cancelled the exchange's task
    watcher_cancelled: bool = False
    #: relayed SSE events not yet fed to the accumulator, with their JSON where already parsed
    unread: list[tuple[ServerSentEvent, Any]] = field(default_factory=list)
    #: the SSE decoder of a recorded event stream
    decoder: SSEDecoder | None = None
    #: relayed SSE bytes not yet fed to ``decoder`` (a stream the proxy relays unchanged)
    undecoded: bytearray | None = None
    #: work left for after the request went upstream (``_run_deferred`` runs it, once)
    deferred: list[Callable[[], None]] = field(default_factory=list)
    #: the task watching for the client going away (started by ``_after_send``)
    watcher: asyncio.Task[None] | None = None


class ProxyEndpoint:
    """The ASGI app behind one vendor route (see the module docstring)."""

    def __init__(self, spec: RouteSpec, state: ProxyState) -> None:
        self.spec = spec
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        state = self.state
        record = None
        if state.recording:
            # The id and the key fingerprint are filled in by ``_identify``, once the request
            # went upstream (or before anything reads them: see ``_run_deferred``).
            record = RequestRecord.begin(state.config.clock(), scope["path"], self.spec.api)
        ex = _Exchange(record=record, started=started)
        if record is not None:
            ex.deferred.append(lambda: self._identify(ex, record, scope))
        state.in_flight += 1
        try:
            await self._handle(ex, scope, receive, send)
        finally:
            try:
                if record is not None:
                    self._finish(ex, record)
            finally:
                state.in_flight -= 1

    def _identify(self, ex: _Exchange, record: RequestRecord, scope: Scope) -> None:
        """The record's id and key fingerprint, and the request's secrets (for redaction)."""
        ex.secrets = client_secrets(scope["headers"], scope["query_string"])
        record.id = new_request_id()
        record.key_fingerprint = key_fingerprint(ex.secrets, self.state.salt)

    def _after_send(self, ex: _Exchange, receive: Receive, task: asyncio.Task[Any]) -> None:
        """Run once the request went upstream: start watching for the client going away (unless
        the exchange already ended) and do the deferred work."""
        if not ex.finished:
            ex.watcher = asyncio.get_running_loop().create_task(
                _watch_disconnect(receive, ex, task)
            )
        _run_deferred(ex)

    # -- request side ---------------------------------------------------------------------

    async def _handle(self, ex: _Exchange, scope: Scope, receive: Receive, send: Send) -> None:
        config = self.state.config
        try:
            body = await _read_body(receive, scope["headers"], config.max_body_bytes)
        except _BodyTooLargeError:
            message = (
                f"request body is larger than the proxy's limit of {config.max_body_bytes} bytes; "
                "send less, or restart the proxy with a larger --max-body-bytes"
            )
            await self._reject(ex, send, 413, message)
            return
        except _ClientGoneError:
            ex.disconnected = True
            return
        ex.request_body = body

        model: str | None = None
        streaming = False
        ex.usage_api = self.spec.api if self.spec.records_usage else None
        if self.spec.api == "gemini":
            model, _, action = str(scope["path_params"]["target"]).rpartition(":")
            if not model or action not in GEMINI_ACTIONS:
                message = (
                    f"unknown Gemini method in {scope['path']!r}; the proxy serves "
                    + ", ".join(SUPPORTED_ROUTES)
                )
                await self._reject(ex, send, 404, message)
                return
            streaming = action == "streamGenerateContent"
            if action == "countTokens":
                ex.usage_api = None
        elif "model" in scope.get("path_params", ()):  # GET /v1/models/{model}
            model = str(scope["path_params"]["model"])
            if not model:  # /v1/models/ names no model: a path no route serves
                message = (
                    f"no route {scope['method']} {scope['path']}; the proxy serves "
                    + ", ".join(SUPPORTED_ROUTES)
                    + ", and answers itself "
                    + ", ".join(OWN_ROUTES)
                )
                await self._reject(ex, send, 404, message)
                return
        if ex.record is not None:
            # a model the path names (Gemini, GET /v1/models/{model}): a body refused below
            # still belongs to it in the log and the metrics
            ex.record.model = model
        if self.spec.json_body:
            try:
                parsed = json_decode.loads(body)
                too_deep = _nested_deeper_than(parsed, body, MAX_JSON_DEPTH)
            except RecursionError:  # json's C parser: around 1,000 levels, less on a deep stack
                too_deep = True
            except ValueError as exc:
                encoding = _content_encoding(scope["headers"])
                if encoding is not None:  # valid JSON, perhaps, but compressed: say so
                    message = (
                        f"request body is sent with content-encoding: {encoding}, which the "
                        "proxy does not decode (it reads each request's JSON to record it); "
                        "send the body uncompressed"
                    )
                    await self._reject(ex, send, 415, message)
                    return
                if _int_too_long(exc):  # valid JSON that Python will not convert
                    digits = sys.get_int_max_str_digits()
                    message = (
                        f"request body holds an integer of more than {digits} "
                        "digits, which the proxy cannot read (it reads each request's JSON to "
                        "record it) and no API field takes; send shorter numbers"
                    )
                    await self._reject(ex, send, 400, message)
                    return
                await self._reject(ex, send, 400, f"request body is not valid JSON: {exc}")
                return
            if too_deep:
                message = (
                    f"request body is nested too deeply: JSON arrays and objects more than "
                    f"{MAX_JSON_DEPTH} levels deep are refused (no vendor accepts such a body)"
                )
                await self._reject(ex, send, 400, message)
                return
            if not isinstance(parsed, dict):
                kind = _JSON_KINDS.get(type(parsed), type(parsed).__name__)
                message = f"request body must be a JSON object, got a JSON {kind}"
                await self._reject(ex, send, 400, message)
                return
            ex.parsed = parsed
            if model is None and isinstance(parsed.get("model"), str):
                model = parsed["model"]
            streaming = streaming or parsed.get("stream") is True

        upstream = config.select_upstream(scope["path"], model)
        if ex.record is not None:
            ex.record.model = model
            ex.record.stream = int(streaming)
            ex.record.upstream = upstream.name
            ex.record.vendor = upstream.vendor
            if (
                self.spec.api in INJECTABLE_APIS
                and ex.parsed
                and needs_include_usage(ex.parsed)
                and upstream.name not in self.state.no_usage_injection
            ):
                edited = inject_include_usage(body, ex.parsed)
                if edited is not None:
                    body = edited
                    ex.strip_usage_chunk = True
            if self.spec.api in DIAGNOSABLE_APIS and self.spec.records_usage:
                body = self._ask_diagnosis(ex, ex.record, body)

        router = self.state.routers.get(upstream.name)
        # A plain asyncio task watches for the client going away and cancels this one (uvicorn
        # serves each request in its own task); an anyio task group costs ~90 calls a request.
        # It starts, and the deferred work runs, in a callback that a callback queues: the first
        # runs when this task next waits (for the upstream's answer), after what was already
        # queued; the upstream client queues the write of the request before that wait (aiohttp
        # writes the body in a task of its own), so the second runs after the request went out.
        # Where the order differs (a new connection: this task waits for it first) the work
        # merely runs earlier; ``_run_deferred`` is idempotent and runs first wherever its
        # results are read.
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._after_send, ex, receive, task)
        try:
            if router is None:
                await self._forward(ex, scope, send, upstream, body)
            else:
                await self._forward_routed(ex, scope, send, router, model, body)
        except asyncio.CancelledError:
            # The watcher's cancel ends the exchange; any other (shutdown) goes on up.
            if not ex.watcher_cancelled or _cancelled_again(task):
                raise
        finally:
            ex.finished = True
            if ex.watcher is not None:
                ex.watcher.cancel()

    async def _forward(
        self, ex: _Exchange, scope: Scope, send: Send, upstream: UpstreamConfig, body: bytes
    ) -> None:
        try:
            await self._exchange(ex, scope, send, upstream, body)
        except UpstreamTimeoutError as exc:
            await self._reject(ex, send, 504, str(exc))
        except UpstreamUnreachableError as exc:
            if upstream.url not in self.state.unreachable:
                self.state.unreachable.add(upstream.url)
                logger.warning("%s; clients get 502 until it answers (logged once until then)", exc)
            await self._reject(ex, send, 502, str(exc))
        else:
            if self.state.unreachable:
                self.state.unreachable.discard(upstream.url)

    async def _forward_routed(
        self,
        ex: _Exchange,
        scope: Scope,
        send: Send,
        router: Router,
        model: str | None,
        body: bytes,
    ) -> None:
        """Send the request to the replica ``router`` picks; if that replica fails before the
        response started, once more to another one (never after: the client has bytes). When
        every replica tried failed, the client's 502 (504 when the last one timed out) names
        each of them and why, in the order tried."""
        facts = self._facts(ex, model, router.policy)
        decision = router.choose(facts)
        tried = []
        failures: list[str] = []  # why each replica tried failed (each names its URL)
        while decision is not None:
            replica = decision.replica
            tried.append(replica)
            self._note_route(ex, router, decision, len(tried))
            try:
                replica.in_flight += 1  # ``router.track(replica)``, without a generator
                try:
                    await self._exchange(ex, scope, send, router.targets[replica.index], body,
                                         peek=True)  # fmt: skip
                finally:
                    replica.in_flight -= 1
                return
            except (UpstreamTimeoutError, UpstreamUnreachableError) as exc:
                if isinstance(exc, UpstreamUnreachableError):
                    router.mark_down(replica, str(exc), refused=True)
                failures.append(str(exc))
                retry = len(tried) < MAX_ATTEMPTS and not ex.response_started
                decision = router.choose(facts, exclude=tried) if retry else None
                if decision is None:
                    status = 504 if isinstance(exc, UpstreamTimeoutError) else 502
                    message = failures[0]
                    if len(failures) > 1:
                        message = f"all {len(failures)} replicas tried failed: " + "; ".join(
                            f"{i}. {failure}" for i, failure in enumerate(failures, 1)
                        )
                    await self._reject(ex, send, status, message)
                    return
                logger.warning("retrying on %s: %s", decision.replica.url, exc)

    def _ask_diagnosis(self, ex: _Exchange, record: RequestRecord, body: bytes) -> bytes:
        """Note the vendor comparison the request asks for; with ``--vendor-diagnostics``, add
        ``diagnostics.previous_message_id`` to a Messages request for an Anthropic upstream
        that has none (the response of its predecessor, or null), returning the body to send.
        Only an Anthropic upstream's silence means "no divergence" (``read_diagnosis``):
        another server that speaks the Messages API may ignore the member."""
        ex.compared_with = requested_comparison(self.spec.api, ex.parsed)
        anthropic = self.spec.api == "anthropic" and record.vendor == "anthropic"
        ex.silence_is_no_divergence = anthropic and ex.compared_with is not None
        diagnostics = self.state.vendor_diagnostics
        if diagnostics is None or not anthropic or ex.parsed is None:
            return body
        if "diagnostics" in ex.parsed:
            return body
        try:
            ex.fingerprint = fingerprint_request(ex.parsed, "anthropic")
        except PromptCacheError:
            return body  # describe_prompt logs why, later
        _run_deferred(ex)  # the key fingerprint
        previous = diagnostics.previous_message_id(record.key_fingerprint, ex.fingerprint)
        edited = add_previous_message_id(body, ex.parsed, previous)
        if edited is None:
            return body
        ex.compared_with = previous
        ex.silence_is_no_divergence = previous is not None
        record.vendor_diagnostics_added = 1
        return edited

    def _facts(self, ex: _Exchange, model: str | None, policy: Policy) -> RequestFacts:
        """What the routing policy sees. A policy that ``reads_prompt`` gets the prefix
        fingerprint (kept for the record), or, when it does not ``needs_fingerprint``, only the
        segments' texts (``prompt_texts``: its chunks' input), the fingerprint being computed
        once the request went upstream (``_settle_route``); one that reads neither gets none,
        and the record fingerprints the request after the response."""
        api = self.spec.api
        body = ex.parsed
        if not policy.reads_prompt or body is None or api is None or not self.spec.records_usage:
            return RequestFacts(api=api, model=model, body=body)
        if ex.fingerprint is None and policy.needs_fingerprint:
            try:
                ex.fingerprint = fingerprint_request(body, api)
            except PromptCacheError:
                ex.fingerprint = None  # describe_prompt logs why, later
        if ex.fingerprint is not None:
            fingerprint = ex.fingerprint
            return RequestFacts(
                api=api, model=model, chained=fingerprint.chained, body=body,
                fingerprint=fingerprint,
            )  # fmt: skip
        try:
            ex.prompt = prompt_texts(body, api)
        except PromptCacheError:
            return RequestFacts(api=api, model=model, body=body)  # describe_prompt logs why
        return RequestFacts(
            api=api, model=model, body=body, prompt=ex.prompt,
            prompt_tokens=lambda: _prompt_tokens(ex, api),
        )  # fmt: skip

    def _note_route(self, ex: _Exchange, router: Router, decision: Decision, attempt: int) -> None:
        record = ex.record
        if record is None:
            return
        record.replica = decision.replica.url
        record.route_policy = router.policy.name
        record.route_reason = decision.reason
        record.route_depth = decision.depth
        record.route_in_flight = decision.in_flight
        record.route_least_in_flight = decision.least_in_flight
        record.route_attempts = attempt
        record.route_best_tokens = decision.best_tokens
        record.route_chosen_tokens = decision.tokens
        if decision.pending is not None:  # the token counts, once the request went upstream
            ex.deferred.append(lambda: _settle_route(record, decision, attempt))

    async def _exchange(
        self,
        ex: _Exchange,
        scope: Scope,
        send: Send,
        upstream: UpstreamConfig,
        body: bytes,
        *,
        peek: bool = False,
    ) -> None:
        """One upstream exchange, relayed to the client; with ``peek``, nothing is sent to the
        client until the upstream's first body bytes (or its end) arrived.

        Raises:
            UpstreamTimeoutError, UpstreamUnreachableError: before the response started.
        """
        refused: int | None = None  # status of a 400/422 to the body with stream_options added
        while True:
            async with self.state.pool.stream(
                upstream,
                scope["method"],
                scope.get("raw_path") or scope["path"].encode(),
                scope["query_string"],
                request_headers(scope["headers"]),
                body,
            ) as response:
                if ex.strip_usage_chunk and response.status_code in (400, 422):
                    # Maybe an OpenAI-compatible server that refuses the stream_options we
                    # added: resend the client's own bytes once, and decide by the outcome.
                    refused = response.status_code
                    ex.strip_usage_chunk = False
                    body = ex.request_body
                    continue
                if refused is not None and response.status_code < 400:
                    # Only the added field was refused: stop adding it for this upstream.
                    # (If the client's own bytes fail too, the 400 was about them: the client
                    # gets that answer, and other requests keep their usage.)
                    logger.warning(
                        "upstream %s refused stream_options.include_usage (HTTP %d); "
                        "its chat streams will be forwarded without it, and without usage",
                        upstream.described,
                        refused,
                    )
                    self.state.no_usage_injection.add(upstream.name)
                chunks = response.aiter_raw()
                first: bytes | None = None
                if peek:
                    # Routed: read the first body bytes before anything goes to the client, so a
                    # replica that dies before sending any (killed while it queued or prefilled
                    # the request) is still retried on another one.
                    try:
                        first = await anext(chunks, b"")
                    except httpx.TransportError as exc:
                        message = describe_transport_error(upstream, exc) + " (before any byte)"
                        raise UpstreamUnreachableError(message) from exc
                await self._relay(ex, send, upstream, response, chunks, first)
                return

    # -- response side --------------------------------------------------------------------

    async def _relay(
        self,
        ex: _Exchange,
        send: Send,
        upstream: UpstreamConfig,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        first: bytes | None = None,
    ) -> None:
        """Send the response to the client: ``first`` (body bytes already read, if any), then
        the rest of ``chunks`` (``response.aiter_raw()``)."""
        record = ex.record
        _run_deferred(ex)  # the id, for the response's header
        status = response.status_code
        is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
        ex.strip_usage_chunk = ex.strip_usage_chunk and is_sse and status < 400
        decoder: SSEDecoder | None = None
        undecoded: bytearray | None = None
        if record is not None:
            record.status = status
            if is_sse:
                record.stream = 1
                decoder = ex.decoder = SSEDecoder()
                if not ex.strip_usage_chunk:  # relayed as is: decoded in batches (see below)
                    undecoded = ex.undecoded = bytearray()
                if ex.usage_api is not None and status < 400:
                    ex.accumulator = stream_accumulator(ex.usage_api)
            if not is_sse or self.state.config.store_bodies:
                ex.response_copy = bytearray()
        headers = response_headers(response.headers.raw, keep_length=not ex.strip_usage_chunk)
        if record is not None:
            headers.append((REQUEST_ID_HEADER, record.id.encode()))
        ex.response_started = True
        await send({"type": "http.response.start", "status": status, "headers": headers})

        copy_limit = self.state.config.max_body_bytes
        next_chunk = chunks.__anext__
        # aiohttp's responses (``direct_client``) tell when the body's end has arrived with the
        # bytes just read: the last chunk then goes out with the end of the response, in one
        # write, and no read waits for the end. Not when the proxy edits the stream: its
        # decoder may hold bytes that follow the last chunk (see the end of stream below).
        complete = None if ex.strip_usage_chunk else getattr(response, "body_complete", None)
        try:
            while True:  # ``async for`` over ``first`` then ``chunks``, without a generator
                if first:
                    chunk, first = first, None
                else:
                    try:
                        chunk = await next_chunk()
                    except StopAsyncIteration:
                        break
                if ex.first_byte is None:
                    ex.first_byte = time.perf_counter()
                if ex.response_copy is not None and not ex.copy_truncated:
                    if len(ex.response_copy) + len(chunk) > copy_limit:
                        ex.copy_truncated = True
                    else:
                        ex.response_copy += chunk
                if undecoded is not None:
                    # Relayed as is: nothing here needs the events, so they are decoded a batch
                    # of bytes at a time, and after the last byte (one pass, not one a chunk).
                    undecoded += chunk
                elif decoder is not None:  # the proxy drops its own usage chunk
                    events = decoder.feed(chunk)
                    chunk, parsed = drop_injected_usage_chunk(events)
                    ex.unread += [(e, parsed.get(i, _UNPARSED)) for i, e in enumerate(events)]
                if complete is not None and complete():
                    ex.finished = True
                    await send({"type": "http.response.body", "body": chunk, "more_body": False})
                    self._sent_last(ex)
                    break
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if undecoded is not None and len(undecoded) >= DECODE_BATCH_BYTES:
                    _decode(ex)
                if len(ex.unread) >= OBSERVE_BATCH_EVENTS:
                    self._observe(ex)
        except httpx.TransportError as exc:
            message = describe_transport_error(upstream, exc) + " (mid-response)"
            if record is not None:
                record.error = message
            _decode(ex)
            at_boundary = decoder is not None and (ex.strip_usage_chunk or decoder.buffered == 0)
            if is_sse and at_boundary:
                # A clean SSE boundary: end the stream with the vendor's own error event.
                await send(
                    {
                        "type": "http.response.body",
                        "body": self._sse_error(message),
                        "more_body": True,
                    }
                )
            else:
                # Mid-event or mid-JSON: close the connection so the client sees a broken stream
                # instead of a silently truncated body.
                return
        else:
            if decoder is not None:
                _decode(ex)
                events, tail = decoder.close()
                rest, parsed = b"", {}
                if ex.strip_usage_chunk:
                    rest, parsed = drop_injected_usage_chunk(events)
                    rest += tail
                ex.unread += [(e, parsed.get(i, _UNPARSED)) for i, e in enumerate(events)]
                if rest:
                    await send({"type": "http.response.body", "body": rest, "more_body": True})
        if not ex.body_sent:
            ex.finished = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            self._sent_last(ex)

    def _observe(self, ex: _Exchange) -> None:
        """Feed ``ex.unread`` events' JSON to the usage accumulator (in stream order) and note
        the stream's end and the vendor's miss reason; empties ``ex.unread``.

        The relay only queues events: they are read here in batches of ``OBSERVE_BATCH_EVENTS``
        and once the response is over, so a stream's last byte reaches the client without
        waiting for the JSON of every event before it (and memory stays bounded on long streams).
        """
        unread, ex.unread = ex.unread, []
        for event, payload in unread:
            data = event.data
            if data == "[DONE]":
                ex.stream_complete = True
                continue
            if not data.startswith("{"):
                continue
            if payload is _UNPARSED:
                if (
                    ex.response_model is not None
                    and ex.response_id is not None
                    and not _may_matter(data)
                ):
                    continue  # a plain delta: its JSON would change nothing read here
                try:
                    payload = json_decode.loads(data)
                except ValueError:
                    continue
            if not isinstance(payload, dict):
                continue
            error = _stream_error(payload)
            if error is not None:
                # The vendor failed after its 200: nothing the client needs follows.
                ex.stream_error = ex.stream_error or error
                ex.stream_complete = True
            if ex.accumulator is not None:
                try:
                    ex.accumulator.feed(payload)
                except Exception as exc:  # odd vendor data must not break the relay
                    logger.warning("usage event not understood: %s", exc)
                    ex.accumulator = None
            if ex.response_model is None:
                ex.response_model = response_model(payload)
            if ex.response_id is None:
                ex.response_id = response_id(payload)
            kind = payload.get("type")
            if kind == "message_start" or (
                isinstance(kind, str) and kind.startswith("response.") and "response" in payload
            ):
                self._note_diagnosis(ex, payload.get("message") or payload.get("response"))
            if kind in _TERMINAL_EVENTS or _gemini_finished(payload):
                ex.stream_complete = True

    def _note_diagnosis(self, ex: _Exchange, payload: Any) -> None:
        """Keep the vendor's diagnosis in ``payload`` (a Message or a Response object); a later
        object of the same response that says nothing keeps the one already seen."""
        if isinstance(payload, dict) and self.spec.api in DIAGNOSABLE_APIS:
            named = ex.compared_with if ex.silence_is_no_divergence else None
            found = read_diagnosis(self.spec.api, payload, compared_with=named)
            if found is not None:
                ex.diagnosis = found

    def _sse_error(self, message: str) -> bytes:
        body = error_body(self.spec.dialect, 502, message).decode()
        if self.spec.dialect == "anthropic":
            return f"event: error\ndata: {body}\n\n".encode()
        return f"data: {body}\n\n".encode()

    async def _reject(self, ex: _Exchange, send: Send, status: int, message: str) -> None:
        """Answer with a vendor-shaped error produced by the proxy itself."""
        _run_deferred(ex)  # the id, for the response's header
        if ex.record is not None:
            ex.record.status = status
            ex.record.error = message
        body = error_body(self.spec.dialect, status, message)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if ex.record is not None:
            headers.append((REQUEST_ID_HEADER, ex.record.id.encode()))
        ex.finished = True
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        self._sent_last(ex)

    def _sent_last(self, ex: _Exchange) -> None:
        """Note that the response's last body message went to the client; when a record is to
        be finished and no other request is in flight, ``give_way`` first (with others in
        flight the event loop has their work to do next anyway, and a yield per response would
        only hand the proxy's CPU time to unrelated processes)."""
        ex.body_sent = True
        ex.ended = time.perf_counter()
        if ex.record is not None and self.state.in_flight == 1:
            give_way()

    # -- the record -----------------------------------------------------------------------

    def _finish(self, ex: _Exchange, record: RequestRecord) -> None:
        """Complete the record, run the hooks and queue the row. Never raises."""
        ended = ex.ended if ex.ended is not None else time.perf_counter()
        _run_deferred(ex)
        if record.vendor is None:  # refused (or left) before an upstream was chosen
            record.vendor = self.state.config.route_vendor(record.route or "", record.model)
        record.latency_ms = (ended - ex.started) * 1000.0
        record.ended_at = record.started_at + (ended - ex.started)
        if ex.first_byte is not None:
            record.ttft_ms = (ex.first_byte - ex.started) * 1000.0
            record.first_byte_at = record.started_at + (ex.first_byte - ex.started)
        try:
            _decode(ex)  # the stream bytes relayed since the last batch (a cancelled relay)
            self._observe(ex)  # the stream events the relay queued
        except Exception:
            logger.exception("request %s: could not read the stream's events", record.id)
        if ex.stream_error is not None:
            # The vendor's own reason comes first (a broken connection after it is a symptom).
            record.error = ex.stream_error
        elif record.error is not None or ex.stream_complete:
            # Already explained, or the client has every event it needs: a close (or a cancel)
            # while the proxy waited for the upstream to end its body is no error.
            pass
        elif ex.disconnected:
            record.error = "client disconnected before the response was complete"
        elif record.status is None:
            record.error = "cancelled before a response started (e.g. the proxy shutting down)"
        elif not ex.body_sent:
            record.error = (
                "cancelled mid-response (e.g. the proxy shutting down): the client got part of "
                "the body"
            )
        record.request_json = ex.parsed
        try:
            self._read_response(ex, record)
        except ValueError as exc:  # not JSON, or usage that is not usage (UsageParseError)
            logger.warning(
                "request %s: recorded without usage: the upstream's response has none the proxy "
                "can read (%s)",
                record.id,
                # the API is the route's: no --api option or api argument to check
                str(exc).removesuffix(API_HINT),
            )
        except Exception:
            logger.exception("request %s: could not read usage", record.id)
        # The prefix comes from the request alone: an unreadable response does not lose it.
        try:
            if ex.parsed is not None and self.spec.api is not None:
                describe_prompt(record, ex.parsed, self.spec.api, ex.fingerprint)
        except Exception:
            logger.exception("request %s: could not read the prefix", record.id)
        if ex.diagnosis is not None:
            record.vendor_miss_reason = ex.diagnosis.reason
            record.vendor_cache_missed_tokens = ex.diagnosis.missed_tokens
        record.vendor_comparison_id = ex.compared_with
        record.response_id = ex.response_id
        record.response_model = ex.response_model
        secrets = [*ex.secrets, *filter(None, [self.state.config.auth_token])]
        if record.error is not None:  # an upstream's 401 may quote the key it refused
            record.error = redact_text(record.error, secrets)
        if self.state.config.store_bodies:
            record.request_body = redact_text(ex.request_body.decode("utf-8", "replace"), secrets)
            if ex.response_copy is not None:
                text = ex.response_copy.decode("utf-8", "replace")
                record.response_body = redact_text(text, secrets)
        for hook in self.state.record_hooks:
            try:
                hook(record)
            except Exception:
                logger.exception("record hook %r failed on request %s", hook, record.id)
        if self.state.prefixes is not None:  # after the hooks: the explainer sets the family
            self.state.prefixes.offer_record(record, ex.request_body, secrets)
        if self.state.store is not None:
            try:
                self.state.store.submit(record.as_row())
            except StoreError:  # closed: the server is past its shutdown grace period
                logger.warning("request %s ended after the log was closed; not recorded", record.id)

    def _read_response(self, ex: _Exchange, record: RequestRecord) -> None:
        """Usage (from the stream or the JSON body) and the upstream's error message."""
        status = record.status or 0
        body = ex.response_copy
        if status >= 400 and record.error is None:
            detail = None
            if body:
                raw = bytes(body)
                detail = error_message_of(raw) or raw[:200].decode("utf-8", "replace")
            record.error = f"upstream answered {status}" + (f": {detail}" if detail else "")
        usage = None
        if ex.accumulator is not None:
            usage = ex.accumulator.result()
        elif ex.usage_api and body and not ex.copy_truncated and status < 400:
            payload = json_decode.loads(body)
            if isinstance(payload, dict):
                usage = parse_usage(ex.usage_api, payload)
                self._note_diagnosis(ex, payload)
                ex.response_id = ex.response_id or response_id(payload)
                ex.response_model = ex.response_model or response_model(payload)
            elif isinstance(payload, list):  # Gemini streamGenerateContent without alt=sse
                accumulator = stream_accumulator(ex.usage_api)
                for item in payload:
                    if isinstance(item, dict):
                        accumulator.feed(item)
                        ex.response_model = ex.response_model or response_model(item)
                usage = accumulator.result()
        if usage is not None:
            upstream = self.state.config.upstreams.get(record.upstream or "")
            apply_usage(record, usage, upstream.price_as if upstream else None)


#: Deepest JSON nesting of a request body the proxy forwards (arrays and objects; the top level
#: is 1). Python's json parser gives up at a depth that depends on the stack (about 1,000), and
#: vendors refuse far shallower bodies, so the proxy answers 400 at one fixed, documented depth.
MAX_JSON_DEPTH = 512


def _int_too_long(exc: ValueError) -> bool:
    """Whether ``exc`` is Python's refusal to convert an integer of more digits than
    ``sys.get_int_max_str_digits()`` (4300 by default): valid JSON, but ``json.loads`` raises a
    plain ``ValueError`` telling the reader to call ``sys.set_int_max_str_digits``."""
    return type(exc) is ValueError and "integer string conversion" in str(exc)


def _nested_deeper_than(parsed: Any, raw: bytes, limit: int) -> bool:
    """Whether the parsed JSON ``parsed`` (read from ``raw``) nests more than ``limit`` levels.

    Iterative, so any depth is safe to check; a body with at most ``limit`` brackets (counted in
    C, strings included) cannot be that deep and is not walked at all.
    """
    if not isinstance(parsed, (dict, list)) or raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    stack: list[tuple[Any, int]] = [(parsed, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


#: Replicas a request is sent to at most: the first choice and one retry.
MAX_ATTEMPTS = 2

#: Relayed SSE events queued before the relay stops to read their JSON (see ``_observe``).
OBSERVE_BATCH_EVENTS = 64

#: Relayed SSE bytes held before the relay feeds them to the decoder (a stream relayed
#: unchanged; one the proxy edits is decoded chunk by chunk). A short stream is decoded once,
#: after its last byte went out.
DECODE_BATCH_BYTES = 64 * 1024

#: ``_Exchange.unread`` payload of an event whose JSON has not been parsed yet.
_UNPARSED: Any = object()

#: Stream events after which nothing the client needs follows (OpenAI chat ends with [DONE]).
_TERMINAL_EVENTS = frozenset(
    {"message_stop", "response.completed", "response.incomplete", "response.failed"}
)


#: Text of every key or value ``_observe`` reads beyond the model and the id: usage (``usage``,
#: Gemini ``usageMetadata``/``usage_metadata``, Bedrock ``metadata``/``metrics``), errors
#: (``error``, ``response.failed``), Anthropic ``message_start``/``message_stop``, Responses
#: ``response.*`` events and Gemini's ``finishReason``. A JSON key can spell a letter only as
#: itself or as a ``\u`` escape, so data with none of these and no ``\u`` has none of them.
#: ``"usage": null``, which OpenAI-compatible servers put on every chunk of a stream that asked
#: for usage (``stream_options.include_usage``), is no usage.
_NULL_USAGE = re.compile(r'"usage"\s*:\s*null')
#: (Plain substring tests: a regex alternation of the markers costs more than decoding the JSON.)
_READ_MARKERS = ("usage", "error", "response", "message_st", "finishReason", "metadata",
                 "metrics", "\\u")  # fmt: skip
#: The markers but ``usage``, which ``_may_matter`` tests first.
_OTHER_MARKERS = _READ_MARKERS[1:]


def _may_matter(data: str) -> bool:
    """Whether the JSON object ``data`` (an SSE event's data) may hold something ``_observe``
    reads beyond the model and the id; False only when decoding it could change nothing."""
    # Each "usage" inside '"usage":null' or '"usage": null' (Python's json.dumps) is no usage;
    # other spellings go through the regex.
    if "usage" in data and data.count("usage") != (
        data.count('"usage":null') + data.count('"usage": null')
    ):
        data = _NULL_USAGE.sub("", data)
        if "usage" in data:
            return True
    for marker in _OTHER_MARKERS:  # noqa: SIM110 (any() over a generator costs a call a marker)
        if marker in data:
            return True
    return False


def _stream_error(payload: dict[str, Any]) -> str | None:
    """The row's ``error`` for a stream event that reports a vendor failure, else ``None``.

    Anthropic ``event: error`` (``{"type": "error", "error": {"type", "message"}}``), an OpenAI
    chat/completions or Gemini chunk ``{"error": {...}}``, a Responses ``error`` event
    (``{"type": "error", "code", "message"}``) and ``response.failed`` (its ``response.error``).
    """
    error: Any = payload.get("error")
    if payload.get("type") == "response.failed":
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        error = error if isinstance(error, dict) else {"message": "response.failed"}
    elif error is None and payload.get("type") == "error":
        # Responses: the error's fields are the event's own
        error = {"code": payload.get("code"), "message": payload.get("message")}
    if isinstance(error, str):
        error = {"message": error}
    if not isinstance(error, dict):
        return None
    message = error.get("message")
    kind = next(
        (v for k in ("type", "status", "code") if isinstance(v := error.get(k), str) and v), None
    )
    text = str(message) if message is not None else json.dumps(error)[:200]
    return "upstream sent an error mid-stream: " + (f"{kind}: {text}" if kind else text)


def _gemini_finished(chunk: dict[str, Any]) -> bool:
    """A Gemini chunk whose candidate carries ``finishReason`` (the last one of a stream)."""
    candidates = chunk.get("candidates")
    return isinstance(candidates, list) and any(
        isinstance(c, dict) and c.get("finishReason") for c in candidates
    )


def give_way() -> None:
    """Offer this process's CPU to another runnable process once (``sched_yield``; nothing where
    the platform has none).

    Called after a response's last byte was written and before the request's record is finished
    (usage, cost, the break explainer, metrics, the row: about 0.15 ms of CPU). A client on the
    same machine, woken by those bytes, is often queued on the proxy's CPU (the kernel wakes a
    task near its waker) and would otherwise wait for that bookkeeping before it sees its
    response; measured on 2 shared cores, the time from the proxy's last write to the client
    having its response fell from about 0.46 ms to 0.26 ms, the same as a bare relay's. With no
    other runnable process on the CPU the call returns at once.
    """
    if _SCHED_YIELD is not None:
        _SCHED_YIELD()


_SCHED_YIELD: Callable[[], None] | None = getattr(os, "sched_yield", None)


def _run_deferred(ex: _Exchange) -> None:
    """Run (and drop) the exchange's deferred work, in order; one that raises is logged and the
    rest still run, so the record still gets its row. Never raises."""
    while ex.deferred:
        work = ex.deferred.pop(0)
        try:
            work()
        except Exception:
            logger.exception("deferred request bookkeeping failed")


def _prompt_tokens(ex: _Exchange, api: str) -> int:
    """The request's approximate prompt tokens, from its fingerprint (computed now from
    ``ex.prompt`` when it was not yet, and kept for the record).

    Raises:
        PromptCacheError: the body cannot be fingerprinted (then the tokens stay unknown).
    """
    if ex.fingerprint is None:
        assert ex.parsed is not None
        ex.fingerprint = fingerprint_request(ex.parsed, api, ex.prompt)
    return ex.fingerprint.approx_prefix_tokens


def _settle_route(record: RequestRecord, decision: Decision, attempt: int) -> None:
    """Fill the record's routing tokens from ``decision`` (``Decision.settled``), unless a later
    attempt's decision has replaced it in the record."""
    if record.route_attempts != attempt or decision.pending is None:
        return
    # ``decision.settled()``'s figures, without building the settled copy
    record.route_best_tokens, record.route_chosen_tokens = decision.pending()


def _decode(ex: _Exchange) -> None:
    """Feed ``ex.undecoded`` (relayed SSE bytes) to ``ex.decoder`` and queue the events it
    completes in ``ex.unread``, their JSON not parsed yet."""
    undecoded = ex.undecoded
    if undecoded and ex.decoder is not None:
        events = ex.decoder.feed(bytes(undecoded))
        undecoded.clear()
        ex.unread += [(e, _UNPARSED) for e in events]


def _content_encoding(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's ``content-encoding`` (``gzip``...), or None when absent or ``identity``."""
    for name, value in headers:
        if name == b"content-encoding":
            text = value.decode("latin-1").strip()
            if text and text.lower() != "identity":
                return text
    return None


async def _read_body(receive: Receive, headers: list[tuple[bytes, bytes]], limit: int) -> bytes:
    """The whole request body, refusing more than ``limit`` bytes before reading them if it can."""
    for name, value in headers:
        if name == b"content-length":
            try:
                if int(value) > limit:
                    raise _BodyTooLargeError
            except ValueError:
                pass
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGoneError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _watch_disconnect(receive: Receive, ex: _Exchange, task: asyncio.Task[Any]) -> None:
    """Cancel the exchange's ``task`` if the client disconnects before the response is
    complete."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
    if not ex.finished:
        ex.disconnected = True
        ex.watcher_cancelled = True
        task.cancel()


def _cancelled_again(task: asyncio.Task[Any]) -> bool:
    """Whether ``task`` has cancel requests besides the one being handled (Python 3.11+ counts
    them; on 3.10 none is seen)."""
    uncancel = getattr(task, "uncancel", None)
    return uncancel is not None and uncancel() > 0
