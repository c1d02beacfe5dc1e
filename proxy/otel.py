"""OpenTelemetry export: one GenAI client span per proxied request, over OTLP/HTTP (protobuf).

``promptcache proxy --otlp-endpoint URL`` (or ``[otel] endpoint = "URL"`` in the config file)
builds a :class:`SpanExport`: the OpenTelemetry SDK's ``TracerProvider`` with a
``BatchSpanProcessor`` feeding the SDK's own ``OTLPSpanExporter`` (HTTP, protobuf). It is a record
hook (``app.state.record_hooks``), so the span is made after the response's last byte went to
the client; the processor only queues it there, and a background thread of the SDK batches and
sends it. Nothing waits on the collector on the request path; a collector that is down costs
the spans (the SDK logs the failed exports), never a request. Batching is the SDK's: every 5 s
or 512 spans, changed with its ``OTEL_BSP_*`` environment variables. ``shutdown`` (at the
proxy's shutdown, after the log is closed) exports what is still queued, waiting 30 s at most for
a collector that does not answer (the SDK's limit).

Span: kind ``CLIENT``, name ``{gen_ai.operation.name} {gen_ai.request.model}``, start and end the
request's own arrival and end (the row's ``started_at`` and ``ended_at``); status ``ERROR`` with
the row's ``error`` when it has one. An incoming W3C ``traceparent`` (and ``tracestate``) header
makes the span a child of the caller's span (the SDK's ``TraceContextTextMapPropagator``), so
the proxy's span sits inside the application's trace; without one the span starts a trace.

GenAI semantic conventions, checked 2026-12-03 against
https://github.com/open-telemetry/semantic-conventions-genai/blob/main/docs/gen-ai/gen-ai-spans.md
(the GenAI conventions moved there from open-telemetry/semantic-conventions; status
"Development"). The names asked for are the current ones; none differs:

=============================================  =================================================
``gen_ai.operation.name``                      ``chat`` (Messages, Chat Completions, Responses),
                                               ``text_completion`` (Completions),
                                               ``generate_content`` (Gemini); custom values for
                                               routes no well-known value fits: ``count_tokens``,
                                               ``list_models``, ``retrieve_model``
``gen_ai.provider.name``                       ``anthropic``, ``openai``, ``gcp.gemini`` (well-known
                                               values); the ``vendor`` column otherwise
                                               (``engine``, ``openai_compatible``)
``gen_ai.request.model``                       the ``model`` column
``gen_ai.response.model``                      the model the response names (``model``, Gemini's
                                               ``modelVersion``); not stored in the log
``gen_ai.request.stream``                      ``true`` on streamed requests only
``gen_ai.response.time_to_first_chunk``        streamed requests: ``ttft_ms`` / 1000 (seconds)
``gen_ai.usage.input_tokens``                  ``total_input_tokens`` (cache reads and writes
                                               included, as the convention asks)
``gen_ai.usage.output_tokens``                 ``output_tokens`` (reasoning included)
``gen_ai.usage.cache_read.input_tokens``       ``cache_read_tokens``
``gen_ai.usage.cache_creation.input_tokens``   ``cache_write_5m_tokens + cache_write_1h_tokens +
                                               cache_write_unknown_tokens``
``gen_ai.usage.reasoning.output_tokens``       ``reasoning_tokens``, when above 0
``server.address``, ``server.port``            the upstream (the replica, when routed)
``error.type``                                 a failed request's HTTP status when >= 400,
                                               else ``_OTHER`` (the convention's fallback)
=============================================  =================================================

Usage attributes are set only when the response carried usage.

Our own attributes, under ``promptcache.``; each is the log column of the same name (NULL columns
are left out): ``request_id`` (the ``id`` column), ``prefix_hash``, ``prefix_family``,
``break_reason``, ``break_segment``, ``cost_usd`` and ``cost_without_cache_usd`` (USD, as
doubles), ``replica``; and ``ttl_tier``: the longest TTL (``5m`` or ``1h``) among the request's
cache breakpoints (the ``breakpoints`` column), left out when none names one.

The OpenTelemetry packages come with the ``proxy`` extra (in a clone of its repository:
``pip install '.[proxy]'``); without them :class:`SpanExport` raises ``ConfigError`` saying so.
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` are honoured; the default
``service.name`` is ``promptcache-proxy``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from promptcache.errors import ConfigError
from promptcache.hosts import check_url_port
from promptcache.ttl import LIFETIME_S

from .record import RequestRecord
from .redact import redact_url

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider

    from .config import UpstreamConfig

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "EXTRA_HINT",
    "SpanExport",
    "TraceContextMiddleware",
    "span_attributes",
    "span_name",
    "traces_url",
]

#: ``service.name`` of the proxy's spans unless ``OTEL_SERVICE_NAME`` (or
#: ``OTEL_RESOURCE_ATTRIBUTES``) names another.
DEFAULT_SERVICE_NAME = "promptcache-proxy"

#: How to get the OpenTelemetry packages (named in the error when they are missing).
EXTRA_HINT = "install promptcache[proxy] (in a clone of its repository: pip install '.[proxy]')"

#: The OTLP/HTTP path of traces, appended to an endpoint given without a path.
TRACES_PATH = "/v1/traces"

#: ``vendor`` column -> ``gen_ai.provider.name`` well-known value (the others pass through).
PROVIDER_NAMES: dict[str, str] = {
    "anthropic": "anthropic",
    "openai": "openai",
    "gemini": "gcp.gemini",
}

#: ``api`` (``RouteSpec.api``) -> ``gen_ai.operation.name`` of its inference route.
OPERATION_NAMES: dict[str, str] = {
    "anthropic": "chat",
    "openai_chat": "chat",
    "openai_responses": "chat",
    "openai_completions": "text_completion",
    "gemini": "generate_content",
}

#: The parent span context of the request being served (from its ``traceparent``), if any.
_PARENT: ContextVar[Context | None] = ContextVar("promptcache_otel_parent", default=None)


def traces_url(endpoint: str, what: str = "--otlp-endpoint") -> str:
    """The OTLP/HTTP traces URL for ``--otlp-endpoint``: ``http://host:4318`` (no path) gets
    ``/v1/traces`` appended, as for ``OTEL_EXPORTER_OTLP_ENDPOINT``; a URL with a path is used
    as given. ``what``: how the error message names the setting.

    Raises:
        ConfigError: not an http(s) URL with a host, or its port is not one from 1 to 65535
            (the message shows the URL with its ``user:password@`` masked).
    """
    shown = redact_url(endpoint)
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname
    except ValueError:
        host = None
    if not host or parts.scheme not in ("http", "https"):
        raise ConfigError(
            f"{what} {shown!r} is not an http(s) URL; give the collector's OTLP/HTTP "
            "address, e.g. http://127.0.0.1:4318"
        )
    check_url_port(parts, f"{what} {shown!r}", "http://127.0.0.1:4318")
    if parts.path in ("", "/"):  # the path goes before a query or fragment, not after it
        return urlunsplit(parts._replace(path=TRACES_PATH))
    return endpoint


def operation_name(record: RequestRecord) -> str:
    """``gen_ai.operation.name`` of a request (see the module docstring)."""
    route = record.route or ""
    if route.endswith(("/count_tokens", ":countTokens")):
        return "count_tokens"
    if route == "/v1/models":
        return "list_models"
    if route.startswith("/v1/models/"):
        return "retrieve_model"
    return OPERATION_NAMES.get(record.api or "", "chat")


def span_name(record: RequestRecord) -> str:
    """``{gen_ai.operation.name} {gen_ai.request.model}``, or the operation alone."""
    operation = operation_name(record)
    return _utf8(f"{operation} {record.model}") if record.model else operation


def ttl_tier(breakpoints: str | None) -> str | None:
    """The longest TTL label among the ``breakpoints`` column's markers (JSON list of
    ``{path, ttl}``), or None when none names one (no markers, or a vendor-fixed TTL)."""
    if not breakpoints:
        return None
    ttls = [bp.get("ttl") for bp in json.loads(breakpoints) if isinstance(bp, dict)]
    known = [t for t in ttls if t in LIFETIME_S]
    return max(known, key=LIFETIME_S.__getitem__) if known else None


def span_attributes(
    record: RequestRecord, upstreams: Mapping[str, UpstreamConfig]
) -> dict[str, str | bool | int | float]:
    """The span's attributes for a finished ``record`` (names in the module docstring).

    ``upstreams``: the config's upstreams, for ``server.address``/``server.port`` when the
    request was not routed to a replica.
    """
    attrs: dict[str, str | bool | int | float] = {
        "gen_ai.operation.name": operation_name(record),
        "gen_ai.provider.name": PROVIDER_NAMES.get(record.vendor or "", record.vendor or "_OTHER"),
    }
    if record.model:
        attrs["gen_ai.request.model"] = record.model
    if record.response_model:
        attrs["gen_ai.response.model"] = record.response_model
    if record.stream:
        attrs["gen_ai.request.stream"] = True
        if record.ttft_ms is not None:
            attrs["gen_ai.response.time_to_first_chunk"] = record.ttft_ms / 1000.0
    if record.total_input_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = record.total_input_tokens
        attrs["gen_ai.usage.output_tokens"] = record.output_tokens or 0
        attrs["gen_ai.usage.cache_read.input_tokens"] = record.cache_read_tokens or 0
        attrs["gen_ai.usage.cache_creation.input_tokens"] = (
            (record.cache_write_5m_tokens or 0)
            + (record.cache_write_1h_tokens or 0)
            + (record.cache_write_unknown_tokens or 0)
        )
        if record.reasoning_tokens:
            attrs["gen_ai.usage.reasoning.output_tokens"] = record.reasoning_tokens
    upstream = upstreams.get(record.upstream or "")
    server = record.replica or (upstream.url if upstream is not None else None)
    address = _server_address(server) if server else None
    if address is not None:
        attrs["server.address"], attrs["server.port"] = address
    if record.error is not None:
        status = record.status or 0
        attrs["error.type"] = str(status) if status >= 400 else "_OTHER"
    ours: dict[str, Any] = {
        "request_id": record.id,
        "prefix_hash": record.prefix_hash,
        "prefix_family": record.prefix_family,
        "break_reason": record.break_reason,
        "break_segment": record.break_segment,
        "ttl_tier": ttl_tier(record.breakpoints),
        "cost_usd": None if record.cost_usd is None else float(record.cost_usd),
        "cost_without_cache_usd": (
            None if record.cost_without_cache_usd is None else float(record.cost_without_cache_usd)
        ),
        "replica": record.replica,
    }
    attrs.update({f"promptcache.{k}": v for k, v in ours.items() if v is not None})
    # a lone surrogate from the client's body (the model, a key in a segment path) cannot be
    # encoded in OTLP's protobuf and would lose the whole export batch: escaped as the log has it
    return {k: _utf8(v) if isinstance(v, str) else v for k, v in attrs.items()}


def _utf8(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) as backslash escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class SpanExport:
    """The span exporter of one proxy app: a record hook (with :class:`TraceContextMiddleware`
    installed, for the parent span) and ``shutdown``.

    Args:
        endpoint: the collector's OTLP/HTTP address (see :func:`traces_url`).
        upstreams: the config's upstreams (for ``server.address``).

    Raises:
        ConfigError: ``endpoint`` is not an http(s) URL, or the OpenTelemetry packages are
            missing (the message says to install the ``proxy`` extra).
    """

    def __init__(
        self,
        endpoint: str,
        upstreams: Mapping[str, UpstreamConfig],
    ) -> None:
        url = traces_url(endpoint)
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.trace import SpanKind, StatusCode
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )
        except ImportError as exc:
            raise ConfigError(
                f"--otlp-endpoint needs the OpenTelemetry packages ({exc.name} is missing); "
                f"{EXTRA_HINT}"
            ) from None
        self.url = url
        self.upstreams = upstreams
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
        self.provider: TracerProvider = TracerProvider(resource=resource)
        # Batching and timeouts: the SDK's defaults and its OTEL_BSP_* / OTEL_EXPORTER_OTLP_*
        # environment variables.
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
        self.tracer = self.provider.get_tracer("promptcache.proxy")
        self.propagator = TraceContextTextMapPropagator()
        self._client_kind = SpanKind.CLIENT
        self._error_code = StatusCode.ERROR

    def __call__(self, record: RequestRecord) -> None:
        """Record hook: make and end the span of ``record`` (queued for export, not sent)."""
        span = self.tracer.start_span(
            span_name(record),
            context=_PARENT.get(),
            kind=self._client_kind,
            attributes=span_attributes(record, self.upstreams),
            start_time=_ns(record.started_at),
        )
        if record.error is not None:
            span.set_status(self._error_code, record.error)
        ended = record.ended_at if record.ended_at is not None else record.started_at
        span.end(end_time=_ns(ended))

    def shutdown(self) -> None:
        """Export the spans still queued and stop the exporter. Blocks: when the collector does
        not answer, the SDK's batch processor waits for its export thread 30 s at most."""
        self.provider.shutdown()


class TraceContextMiddleware:
    """Pure-ASGI middleware: an HTTP request's ``traceparent``/``tracestate`` headers become
    the parent of the span its record hook makes (``SpanExport.__call__`` runs in the request's
    own task, inside this middleware's call, so it sees the context variable set here)."""

    def __init__(self, app: ASGIApp, spans: SpanExport) -> None:
        self.app = app
        self.propagator = spans.propagator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in (b"traceparent", b"tracestate")
        }
        if "traceparent" not in carrier:
            await self.app(scope, receive, send)
            return
        token = _PARENT.set(self.propagator.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            _PARENT.reset(token)


@functools.lru_cache(maxsize=256)
def _server_address(url: str) -> tuple[str, int] | None:
    """(host, port) of an upstream's base URL (the scheme's port when it names none)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def _ns(unix_s: float) -> int:
    """Unix seconds as the integer nanoseconds OpenTelemetry timestamps are."""
    return round(unix_s * 1e9)
