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
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

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
from .vendors import ROUTES, SUPPORTED_ROUTES, Dialect, dialect_for_path, error_body

__all__ = ["build_app"]


#: Seconds the shutdown waits for requests still finishing before it closes the log.
DRAIN_S = 5.0


def build_app(config: ProxyConfig) -> Starlette:
    """The proxy as an ASGI app (serve it with uvicorn; see ``serve.serve``).

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
            message = f"no route {request.method} {path}; the proxy serves " + ", ".join(
                SUPPORTED_ROUTES
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
    app = Starlette(
        routes=[
            Route(spec.path, ProxyEndpoint(spec, state), methods=list(spec.methods))
            for spec in ROUTES
        ],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
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


def _default_dialect(config: ProxyConfig) -> Dialect:
    vendor = config.upstreams[config.default_upstream].vendor
    if vendor == "anthropic":
        return "anthropic"
    if vendor == "gemini":
        return "gemini"
    return "openai"
