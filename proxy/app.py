"""``build_app(config)``: the proxy's starlette app, routes and lifecycle only.

The app serves each vendor route in ``vendors.ROUTES`` with a ``ProxyEndpoint``; anything else
gets a vendor-shaped 404 (or 405) that lists the supported routes. ``app.state`` carries:

- ``config``: the ``ProxyConfig``;
- ``store``: the ``RequestStore`` (``None`` with recording off);
- ``prefixes``: the ``PrefixStore`` of ``--store-prefixes`` (``None`` without it), written
  and closed with the log;
- ``record_hooks``: the list of ``Callable[[RequestRecord], None]`` called on each finished
  record before it is queued for writing; append to it to observe traffic;
- ``proxy``: the shared ``ProxyState`` (``proxy.routers``: the ``Router`` of each upstream
  that lists replicas, health-checked while the app runs).

The log file is opened and migrated here (so a bad ``--db`` fails before the server starts);
the writer thread starts with the app's lifespan and is drained and stopped when it ends. With
``config.otlp_endpoint`` a ``otel.SpanExport`` is a record hook too (one span per request), and
its queued spans are exported when the lifespan ends, after the log is closed. With
``config.vendor_diagnostics`` a ``diagnostics.VendorDiagnostics`` names the previous response in
Anthropic requests (``app.state.proxy.vendor_diagnostics``).

``build_app(config, tune_gc=True)`` (what ``promptcache proxy`` serves) also tunes Python's
cyclic garbage collector for the process once the app has started (``tune_gc_for_serving``).
"""

from __future__ import annotations

import gc
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from . import breaks, diagnostics, metrics
from .config import ProxyConfig
from .enrich import warm_up
from .forward import UpstreamPool
from .handler import ProxyEndpoint, ProxyState, RecordHook
from .middleware import AuthMiddleware
from .otel import SpanExport, TraceContextMiddleware
from .prefix_store import PrefixStore
from .report import live as report_live
from .routing.router import Router
from .store import RequestStore
from .vendors import OWN_ROUTES, ROUTES, SUPPORTED_ROUTES, Dialect, dialect_for_path, error_body

__all__ = ["build_app"]


#: Seconds the shutdown waits for requests still finishing before it closes the log.
DRAIN_S = 5.0


def build_app(config: ProxyConfig, *, tune_gc: bool = False) -> Starlette:
    """The proxy as an ASGI app (serve it with uvicorn; see ``serve.serve``).

    ``tune_gc``: once the app has started, run ``tune_gc_for_serving()`` (for a process that
    serves this app alone; an embedding process keeps its own collector settings).

    Raises:
        StoreError: ``config.db_path`` cannot be opened or migrated.
        ConfigError: ``config.otlp_endpoint`` is set but the OpenTelemetry packages are missing.
    """
    spans = None
    if config.otlp_endpoint is not None:
        spans = SpanExport(config.otlp_endpoint, config.upstreams)
    store = None
    if config.db_path is not None:
        store = RequestStore(
            config.db_path,
            flush_interval_s=config.flush_interval_s,
            batch_rows=config.batch_rows,
            queue_rows=config.queue_rows,
        )
    prefixes = None
    if config.store_prefixes and config.db_path is not None:
        prefixes = PrefixStore(config.db_path, flush_interval_s=config.flush_interval_s)
    hooks: list[RecordHook] = [] if spans is None else [spans]
    pool = UpstreamPool(config.upstreams)
    state = ProxyState(
        config=config,
        pool=pool,
        store=store,
        record_hooks=hooks,
        salt=store.salt if store is not None else secrets.token_bytes(16),
        routers={u.name: Router(u) for u in config.upstreams.values() if u.replicas},
        prefixes=prefixes,
    )
    default_dialect = _default_dialect(config)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if state.recording:
            await anyio.to_thread.run_sync(warm_up)
        if store is not None:
            store.start()
        if prefixes is not None:
            prefixes.start()
        for router in state.routers.values():
            await router.start()
        if tune_gc:
            tune_gc_for_serving()
        try:
            yield
        finally:
            for router in state.routers.values():
                await router.aclose()
            # Requests cancelled at the end of uvicorn's grace period are still unwinding: let
            # them hand their rows to the log before it closes.
            with anyio.move_on_after(DRAIN_S):
                while state.in_flight:
                    await anyio.sleep(0.01)
            await pool.aclose()
            if app.state.report_cache is not None:
                app.state.report_cache.close()
            if store is not None:
                await anyio.to_thread.run_sync(store.close)
            if prefixes is not None:
                await anyio.to_thread.run_sync(prefixes.close)
            if spans is not None:
                await anyio.to_thread.run_sync(spans.shutdown)

    async def http_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException):  # registered for HTTPException only
            raise exc
        path = request.url.path
        if exc.status_code == 404:
            message = (
                f"no route {request.method} {path}; the proxy serves "
                + ", ".join(SUPPORTED_ROUTES)
                + ", and answers itself "
                + ", ".join(OWN_ROUTES)
            )
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = f"{request.method} is not allowed on {path}; use {allowed}"
        else:
            message = exc.detail
        body = error_body(dialect_for_path(path, default_dialect), exc.status_code, message)
        return Response(
            body, status_code=exc.status_code, media_type="application/json", headers=exc.headers
        )

    middleware = []
    if spans is not None:
        middleware.append(Middleware(TraceContextMiddleware, spans=spans))
    if config.auth_token:
        middleware.append(
            Middleware(AuthMiddleware, token=config.auth_token, default_dialect=default_dialect)
        )
    endpoints = [(spec, ProxyEndpoint(spec, state)) for spec in ROUTES]
    app = ProxyApp(
        routes=[Route(spec.path, e, methods=list(spec.methods)) for spec, e in endpoints],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    for spec, endpoint in endpoints:
        if "{" not in spec.path:  # a fixed path: served without Starlette's routing
            wrapped: ASGIApp = endpoint
            for entry in reversed(middleware):
                wrapped = entry.cls(wrapped, *entry.args, **entry.kwargs)
            for method in spec.methods:
                app.direct[(method, spec.path)] = wrapped
    app.state.config = config
    app.state.store = store
    app.state.prefixes = prefixes
    app.state.record_hooks = hooks
    app.state.proxy = state
    explainer = breaks.install(app, clock=config.clock)  # runs first: fills the break columns
    if config.vendor_diagnostics:  # names the previous response in Anthropic requests
        diagnostics.install(app, explainer, clock=config.clock)
    metrics.install(app)  # GET /metrics, GET /healthz
    # GET /report, GET /report.json
    report_live.install(app, config.db_path, clock=config.clock, refresh_s=config.report_refresh_s)
    return app


class ProxyApp(Starlette):
    """The proxy's Starlette app, with a short way in for its busiest routes.

    A request whose method and path are those of a fixed vendor route (``POST
    /v1/chat/completions``...) goes straight to its endpoint, through the user middleware (auth,
    trace context) only: Starlette's error middleware, exception middleware and route matching
    cost about 100 Python calls a request and handle nothing a ``ProxyEndpoint`` does not (it
    answers every error itself; an exception it lets out reaches uvicorn, which answers 500 and
    logs it). Everything else (Gemini's ``/v1beta/models/{target}``, ``/metrics``, the report,
    404s and 405s) goes through Starlette as usual.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (method, path) -> the endpoint inside the user middleware
        self.direct: dict[tuple[str, str], ASGIApp] = {}
        # A path no route serves is a 404 listing the routes, a trailing slash too: Starlette
        # would answer 307 to the path without it, at the host the client's Host header names.
        self.router.redirect_slashes = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            direct = self.direct.get((scope["method"], scope["path"]))
            if direct is not None:
                scope["app"] = self
                await direct(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _default_dialect(config: ProxyConfig) -> Dialect:
    vendor = config.upstreams[config.default_upstream].vendor
    if vendor == "anthropic":
        return "anthropic"
    if vendor == "gemini":
        return "gemini"
    return "openai"


#: The proxy's threshold for a young-generation collection (Python's default is 700). The
#: collector's own instructions over 150 routed chat requests at concurrency 8
#: (``benchmarks/proxy_cpu_split.py --requests 300 --callgrind 150``, callgrind's inclusive count
#: of ``gc_collect_main``): 16.9M with Python's defaults, 12.5M after ``gc.freeze`` alone, 9.3M
#: with this threshold too.
GC_YOUNG_THRESHOLD = 7000


def tune_gc_for_serving() -> None:
    """Tune Python's cyclic garbage collector for a process that serves the proxy, once its
    startup is done: collect once, then move every object that survived startup (modules,
    classes, the tokenizer's and the price table's data) to the permanent generation
    (``gc.freeze``), so that the oldest generation's collections no longer walk them again and
    again while requests are served; and raise the young generation's threshold to
    ``GC_YOUNG_THRESHOLD`` (the older generations keep theirs). Garbage made later is collected
    as before.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
