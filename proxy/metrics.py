"""Prometheus metrics for the proxy: ``GET /metrics`` and ``GET /healthz``.

Every app gets its own :class:`prometheus_client.CollectorRegistry`, so two proxies in one process
(tests, embedding) never share or double-register series. :func:`install` adds the two routes and
appends :class:`ProxyMetrics` to ``app.state.record_hooks``; the break explainer
(:mod:`.breaks`) must run before it so the ``reason`` label is known, which
:func:`.breaks.install` guarantees by inserting itself first.

Series (all labelled ``vendor`` and ``model``; units in the name, Prometheus style):

==========================================  =========  =====================================
``promptcache_requests_total``              counter    every recorded request (+ ``status``)
``promptcache_input_tokens_total``          counter    uncached input tokens
``promptcache_cache_read_tokens_total``     counter    input tokens read from the cache
``promptcache_cache_write_tokens_total``    counter    written to the cache (+ ``ttl``)
``promptcache_output_tokens_total``         counter    output tokens (reasoning included)
``promptcache_cost_usd_total``              counter    our computed cost, USD
``promptcache_cost_without_cache_usd_total`` counter   the same traffic priced with no cache
``promptcache_cache_breaks_total``          counter    cache breaks (+ ``reason``)
``promptcache_new_prefixes_total``          counter    first requests of a prefix family (not
                                                       breaks: nothing earlier to reuse)
``promptcache_cache_break_lost_tokens_total`` counter  input tokens the breaks lost (+ ``reason``)
``promptcache_cache_break_lost_usd_total``  counter    what those tokens cost over a cache read,
                                                       USD (+ ``reason``; priced models only)
``promptcache_unexpected_misses_total``     counter    same prefix within the TTL, 0 cache reads
``promptcache_upstream_errors_total``       counter    status >= 500 (the proxy's 502 / 504 for
                                                       an upstream it could not reach or hear
                                                       from included; not a client that left)
``promptcache_request_latency_seconds``     histogram  request start to last byte
``promptcache_ttft_seconds``                histogram  request start to first body byte
``promptcache_log_rows_dropped_total``      counter    rows that never reached the log
                                                       (``reason``; no vendor/model labels)
==========================================  =========  =====================================

``promptcache_log_rows_dropped_total`` counts ``reason="queue_full"`` (the writer fell behind: a
stalled disk, a Postgres server away) and ``reason="write_failed"`` (the database refused the
row: a full disk, a broken file; or a stop came while a Postgres server was away);
while rows are being lost ``/healthz`` says ``"degraded"`` (see :func:`install`).

Tokens lost by a break are the explainer's (``breaks.tokens_lost``), priced as the report prices
them (``proxy/report/``): each lost token at (input - cache read) rate, and those the request
paid as its own cache writes (1h first, then 5m and TTL-unknown) at (write - input) on top, at
the rates of the row that priced the request. Summed over a run they equal the report's
``tokens_lost`` / ``usd_lost`` per reason.

An upstream with replicas adds the per-replica series of :mod:`.routing.metrics` (in flight,
health, routed by reason and by prefix, fallbacks, routing regret) and its fleet hit rate.

``model`` comes from the client's request body, so its label values are capped
(:data:`MAX_MODEL_LABELS`); later new models are counted under ``model="other"``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .breaks import NOT_A_BREAK
from .routing.metrics import RoutingCollector

__all__ = ["DEGRADED_FOR_S", "MAX_MODEL_LABELS", "LogLossCollector", "ProxyMetrics", "install"]

logger = logging.getLogger(__name__)

#: Distinct ``model`` label values kept before new ones fold into ``"other"`` (bounds cardinality).
MAX_MODEL_LABELS = 200

#: Seconds ``/healthz`` keeps saying ``"degraded"`` after the log last lost a row.
DEGRADED_FOR_S = 60.0

#: Latency buckets in seconds: 5 ms to 5 min (LLM calls are long; streams longer still).
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
#: TTFT buckets in seconds: a prefix cache hit mostly shows here.
TTFT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32)

_WRITE_BUCKETS = (
    ("5m", "cache_write_5m_tokens"),
    ("1h", "cache_write_1h_tokens"),
    ("unknown", "cache_write_unknown_tokens"),
)


class ProxyMetrics:
    """The proxy's Prometheus series in their own registry; calling it records one request.

    Args:
        registry: where the series live; a fresh :class:`CollectorRegistry` when omitted.

    Calling the instance with a ``RequestRecord`` (see ``record.py``) updates every series. It
    never raises (a broken record is logged and skipped), as record hooks must not.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        labels = ["vendor", "model"]

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, [*labels, *extra], registry=self.registry)

        self.requests = counter("promptcache_requests", "Requests recorded.", ("status",))
        self.input_tokens = counter(
            "promptcache_input_tokens", "Uncached input tokens (not read from or written to cache)."
        )
        self.cache_read_tokens = counter(
            "promptcache_cache_read_tokens", "Input tokens read from the prompt cache."
        )
        self.cache_write_tokens = counter(
            "promptcache_cache_write_tokens", "Input tokens written to the prompt cache.", ("ttl",)
        )
        self.output_tokens = counter("promptcache_output_tokens", "Output tokens.")
        self.cost_usd = counter(
            "promptcache_cost_usd", "Computed cost in USD (priced models only)."
        )
        self.cost_without_cache_usd = counter(
            "promptcache_cost_without_cache_usd",
            "Cost in USD had every input token been billed at the uncached input rate.",
        )
        self.cache_breaks = counter(
            "promptcache_cache_breaks", "Cache breaks by reason (see proxy/breaks.py).", ("reason",)
        )
        self.new_prefixes = counter(
            "promptcache_new_prefixes",
            "First requests of a prefix family: not cache breaks, nothing earlier could be reused.",
        )
        self.break_lost_tokens = counter(
            "promptcache_cache_break_lost_tokens",
            "Input tokens cache breaks lost (prefilled again instead of read), by reason; where "
            "caching is automatic, at most this many (a vendor caches in increments, an engine "
            "in KV blocks).",
            ("reason",),
        )
        self.break_lost_usd = counter(
            "promptcache_cache_break_lost_usd",
            "USD the lost tokens cost beyond a cache read, by reason (priced models only).",
            ("reason",),
        )
        self.unexpected_misses = counter(
            "promptcache_unexpected_misses",
            "Requests that should have hit (same prefix within the TTL) but read 0 cached tokens.",
        )
        self.upstream_errors = counter(
            "promptcache_upstream_errors",
            "Upstream failures: HTTP status >= 500, the proxy's 502 / 504 for an unreachable or "
            "silent upstream included.",
            ("status",),
        )
        self.latency = Histogram(
            "promptcache_request_latency_seconds",
            "Time from request start to the last response byte.",
            labels,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.ttft = Histogram(
            "promptcache_ttft_seconds",
            "Time from request start to the first response body byte.",
            labels,
            buckets=TTFT_BUCKETS_S,
            registry=self.registry,
        )
        self._models: set[str] = set()
        # (series, label values) -> the labelled child: ``labels()`` validates and locks on every
        # call (about 3 us each, eight or more per request); children never change once made
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def _model_label(self, model: str | None) -> str:
        name = model or "(none)"  # as `report --group-by model` names it
        if name in self._models:
            return name
        # a lone surrogate ("\ud800" in the JSON body) cannot be written as UTF-8: in a label
        # it would fail every later scrape; escaped as the log stores it
        name = name.encode("utf-8", "backslashreplace").decode("utf-8")
        if name in self._models:
            return name
        if len(self._models) >= MAX_MODEL_LABELS:
            return "other"
        self._models.add(name)
        return name

    def _child(self, series: Any, *values: str) -> Any:
        key = (series, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = series.labels(*values)
        return child

    def __call__(self, record: Any) -> None:
        """Record one request (a ``RequestRecord``); logs and swallows any error."""
        try:
            self._observe(record)
        except Exception:  # a hook must never break forwarding or logging
            logger.exception("metrics hook failed for request %s", getattr(record, "id", "?"))

    def _observe(self, record: Any) -> None:
        # None only for a request refused before it went upstream whose vendor only its body's
        # model could have chosen (ProxyConfig.route_vendor)
        vendor = record.vendor or "unknown"
        model = self._model_label(record.model)
        status = int(record.status or 0)
        self._child(self.requests, vendor, model, str(status)).inc()
        # No status: nothing was answered because the client left (or the proxy stopped) first,
        # which is no upstream failure; a refused, reset or timed-out upstream is a 502 / 504.
        if status >= 500:
            self._child(self.upstream_errors, vendor, model, str(status)).inc()
        if record.uncached_input_tokens is not None:
            self._child(self.input_tokens, vendor, model).inc(record.uncached_input_tokens)
            self._child(self.cache_read_tokens, vendor, model).inc(record.cache_read_tokens or 0)
            for ttl, field in _WRITE_BUCKETS:
                tokens = getattr(record, field) or 0
                if tokens:
                    self._child(self.cache_write_tokens, vendor, model, ttl).inc(tokens)
            self._child(self.output_tokens, vendor, model).inc(record.output_tokens or 0)
        if record.cost_usd is not None:
            self._child(self.cost_usd, vendor, model).inc(float(record.cost_usd))
        if record.cost_without_cache_usd is not None:
            self._child(self.cost_without_cache_usd, vendor, model).inc(
                float(record.cost_without_cache_usd)
            )
        if record.break_reason == NOT_A_BREAK:  # as the report counts it: Summary.new_prefixes
            self._child(self.new_prefixes, vendor, model).inc()
        elif record.break_reason is not None:
            self._child(self.cache_breaks, vendor, model, record.break_reason).inc()
            self._observe_loss(record, vendor, model)
        if record.unexpected_miss:
            self._child(self.unexpected_misses, vendor, model).inc()
        if record.latency_ms is not None:
            self._child(self.latency, vendor, model).observe(record.latency_ms / 1000.0)
        if record.ttft_ms is not None:
            self._child(self.ttft, vendor, model).observe(record.ttft_ms / 1000.0)

    def _observe_loss(self, record: Any, vendor: str, model: str) -> None:
        lost = getattr(record, "break_tokens_lost", None)
        if not lost:
            return
        reason = record.break_reason
        self._child(self.break_lost_tokens, vendor, model, reason).inc(lost)
        cost = record.cost
        if cost is None:
            return
        price = cost.price
        w1 = record.cache_write_1h_tokens or 0
        w5 = (record.cache_write_5m_tokens or 0) + (record.cache_write_unknown_tokens or 0)
        lost_1h = min(lost, w1)
        lost_5m = min(lost - lost_1h, w5)
        usd = (
            lost * (price.input - price.cache_read)
            + lost_5m * (price.cache_write_5m - price.input)
            + lost_1h * (price.cache_write_1h - price.input)
        ) / Decimal(1_000_000)
        self._child(self.break_lost_usd, vendor, model, reason).inc(float(usd))

    def exposition(self) -> bytes:
        """The registry in Prometheus text format 0.0.4 (what ``GET /metrics`` returns)."""
        return bytes(generate_latest(self.registry))


class LogLossCollector(Collector):
    """``promptcache_log_rows_dropped_total{reason}``, read from a ``RequestStore`` at scrape.

    The store counts its losses itself (``dropped_rows``: the queue was full; ``failed_rows``:
    the database refused the row, or a stop could not write it), on the event loop and on its
    writer thread; reading them when
    Prometheus scrapes keeps both paths free of metrics code.
    """

    def __init__(self, store: Any) -> None:
        self.store = store

    def collect(self) -> Iterator[CounterMetricFamily]:
        """Yield the one counter family, labelled ``reason``."""
        family = CounterMetricFamily(
            "promptcache_log_rows_dropped",
            "Request rows that never reached the log: the writer's queue was full "
            "(queue_full), or the database refused them, e.g. a full disk, or a Postgres "
            "server away at the stop did not take them (write_failed).",
            labels=["reason"],
        )
        family.add_metric(["queue_full"], self.store.dropped_rows)
        family.add_metric(["write_failed"], self.store.failed_rows)
        yield family


def install(app: Starlette, *, degraded_for_s: float = DEGRADED_FOR_S) -> ProxyMetrics:
    """Add ``GET /metrics`` and ``GET /healthz`` to ``app`` and record every request.

    Appends the hook to ``app.state.record_hooks`` (created if missing) and keeps the instance on
    ``app.state.metrics``. With a log (``app.state.store``) the registry also carries
    ``promptcache_log_rows_dropped_total`` (:class:`LogLossCollector`).

    ``/healthz`` answers 200 while the app serves, with ``{"status": "ok"}``; with a log it adds
    ``"writer_queue"`` (rows waiting) and ``"log_rows_dropped"`` (rows lost so far), and says
    ``"status": "degraded"`` while rows are being lost: within ``degraded_for_s`` seconds of the
    latest loss, and while a Postgres log's writes fail (the rows wait). It stays 200 then:
    forwarding works, only the log is incomplete.

    Returns:
        the :class:`ProxyMetrics` now attached to ``app``.
    """
    metrics = ProxyMetrics()
    log: Any = getattr(app.state, "store", None)
    if hasattr(log, "dropped_rows"):
        metrics.registry.register(LogLossCollector(log))
    routers = getattr(getattr(app.state, "proxy", None), "routers", None)
    hooks = getattr(app.state, "record_hooks", None)
    if hooks is None:
        hooks = []
        app.state.record_hooks = hooks
    hooks.append(metrics)
    if routers:
        routing = RoutingCollector(routers.values())
        metrics.registry.register(routing)
        hooks.append(routing)  # counts routing regret and the fleet's usage per request
    app.state.metrics = metrics

    async def metrics_endpoint(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def healthz(request: Request) -> Response:
        body: dict[str, Any] = {"status": "ok"}
        store: Any = getattr(app.state, "store", None)
        queue_size = getattr(store, "queue_size", None)
        if callable(queue_size):
            body["writer_queue"] = queue_size()
        if hasattr(store, "dropped_rows"):
            body["log_rows_dropped"] = store.dropped_rows + store.failed_rows
            last = store.last_loss_at
            if last is not None and time.monotonic() - last < degraded_for_s:
                body["status"] = "degraded"
            if getattr(store, "failing_since", None) is not None:  # a Postgres log away
                body["status"] = "degraded"
        return JSONResponse(body)

    # Routes go first so a catch-all proxy route added earlier cannot shadow them.
    app.router.routes.insert(0, Route("/metrics", metrics_endpoint, methods=["GET"]))
    app.router.routes.insert(1, Route("/healthz", healthz, methods=["GET"]))
    return metrics
