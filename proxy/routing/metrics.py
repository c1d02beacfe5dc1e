"""Prometheus series of the routers, read from their state when ``/metrics`` is scraped.

==========================================  =========  ==========================================
``promptcache_replica_in_flight``           gauge      requests in flight per replica
``promptcache_replica_healthy``             gauge      1 while the replica is in rotation
``promptcache_routed_total``                counter    requests routed, by ``reason``
                                                       (prefix, new_prefix, overloaded,
                                                       least_loaded, round_robin, kv_events,
                                                       retry)
``promptcache_routed_by_prefix_total``      counter    routed to the replica holding their prefix
                                                       (``prefix`` policy; ``kv_events`` ones
                                                       are ``routed{reason="kv_events"}``)
``promptcache_route_fallbacks_total``       counter    not sent where the policy preferred:
                                                       ``kind="overloaded"`` (load margin) or
                                                       ``kind="retry"`` (another replica failed)
``promptcache_route_available_tokens_total`` counter   prompt tokens the best-matching replica
                                                       held (``route_best_tokens``)
``promptcache_route_regret_tokens_total``   counter    of those, tokens the chosen replica did
                                                       not hold (best - chosen)
``promptcache_fleet_hit_rate``              gauge      cache-read / prompt tokens the replicas
                                                       reported since the proxy started (token-
                                                       weighted; labelled ``upstream`` only)
==========================================  =========  ==========================================

All but the last are labelled ``upstream`` (the upstream's name) and ``replica`` (its base URL).
All but the two gauges are counted from the request records (``RoutingCollector`` is also a
record hook): a request counts once, on the replica that answered it, with its row's
``route_reason``, after its response ended, so a request retried on another replica is one
``retry`` there and nothing on the replica that failed, as in the log and the report. Tokens are
the policy's: exact for ``kv_events`` (blocks x block size, what the engine then reports as
cached), approximate for ``prefix`` (the prompt's approximate tokens pro rata of the matched
characters); policies that match no prefix (``least_loaded``, ``round_robin``) measure no
regret, so their replicas have no sample of the two token series. The fleet hit rate weighs every
request by its prompt tokens (a 10,000-token miss counts 10,000 times a 1-token hit), unlike an
average of per-request hit rates.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .router import Router

__all__ = ["RoutingCollector"]

_FALLBACKS = ("overloaded", "retry")


class RoutingCollector(Collector):
    """The series above for ``routers`` (an iterable of ``Router``); calling it with a
    ``RequestRecord`` counts the request's routing regret and usage (a record hook)."""

    def __init__(self, routers: Iterable[Router]) -> None:
        self.routers = list(routers)
        self._lock = threading.Lock()
        #: (upstream, replica) -> [available tokens, regret tokens]
        self._regret: dict[tuple[str, str], list[int]] = {}
        #: upstream -> [cache-read tokens, prompt tokens] of requests with usage
        self._usage: dict[str, list[int]] = {}
        #: (upstream, replica) -> requests per ``route_reason``
        self._reasons: dict[tuple[str, str], dict[str, int]] = {}

    def __call__(self, record: Any) -> None:
        """Count one request's ``route_reason``, ``route_best_tokens`` /
        ``route_chosen_tokens`` and usage, on the replica that answered it."""
        replica = getattr(record, "replica", None)
        if replica is None:
            return
        upstream = record.upstream or ""
        best, chosen = record.route_best_tokens, record.route_chosen_tokens
        prompt = record.total_input_tokens
        reason = record.route_reason
        with self._lock:
            if reason is not None:
                reasons = self._reasons.setdefault((upstream, replica), {})
                reasons[reason] = reasons.get(reason, 0) + 1
            if best is not None and chosen is not None:
                sums = self._regret.setdefault((upstream, replica), [0, 0])
                sums[0] += best
                sums[1] += best - chosen
            if prompt is not None:
                usage = self._usage.setdefault(upstream, [0, 0])
                usage[0] += record.cache_read_tokens or 0
                usage[1] += prompt

    def collect(self) -> Iterator[Metric]:
        """Yield every family, one sample per replica (per reason for ``routed``)."""
        labels = ["upstream", "replica"]
        in_flight = GaugeMetricFamily(
            "promptcache_replica_in_flight", "Requests in flight per replica.", labels=labels
        )
        healthy = GaugeMetricFamily(
            "promptcache_replica_healthy",
            "1 while the replica is in rotation (health checks pass), else 0.",
            labels=labels,
        )
        routed = CounterMetricFamily(
            "promptcache_routed",
            "Requests routed to a replica, by routing reason.",
            labels=[*labels, "reason"],
        )
        by_prefix = CounterMetricFamily(
            "promptcache_routed_by_prefix",
            "Requests the prefix policy routed to the replica that held their longest prefix "
            "(route_reason prefix); a kv_events fleet counts its requests routed by the blocks "
            'a replica holds in promptcache_routed_total{reason="kv_events"}.',
            labels=labels,
        )
        fallbacks = CounterMetricFamily(
            "promptcache_route_fallbacks",
            "Requests not sent where the policy preferred: the load margin was exceeded "
            "(overloaded) or another replica failed before the response started (retry).",
            labels=[*labels, "kind"],
        )
        available = CounterMetricFamily(
            "promptcache_route_available_tokens",
            "Prompt tokens the best-matching replica held (exact for kv_events, approximate "
            "for prefix), by the replica that answered.",
            labels=labels,
        )
        regret = CounterMetricFamily(
            "promptcache_route_regret_tokens",
            "Of the available tokens, those the chosen replica did not hold (routing regret).",
            labels=labels,
        )
        hit_rate = GaugeMetricFamily(
            "promptcache_fleet_hit_rate",
            "Cache-read tokens / prompt tokens the replicas reported since the proxy started "
            "(token-weighted).",
            labels=["upstream"],
        )
        with self._lock:
            sums = {key: list(v) for key, v in self._regret.items()}
            usage = {key: list(v) for key, v in self._usage.items()}
            routed_by = {key: dict(v) for key, v in self._reasons.items()}
        for router in self.routers:
            name = router.upstream.name
            for replica in router.replicas:
                key = [name, replica.url]
                in_flight.add_metric(key, replica.in_flight)
                healthy.add_metric(key, int(replica.healthy))
                reasons = routed_by.get((name, replica.url), {})
                for reason, count in sorted(reasons.items()):
                    routed.add_metric([*key, reason], count)
                by_prefix.add_metric(key, reasons.get("prefix", 0))
                for kind in _FALLBACKS:
                    fallbacks.add_metric([*key, kind], reasons.get(kind, 0))
                if router.policy.matches_prefixes:  # least_loaded, round_robin: none to show
                    best, lost = sums.get((name, replica.url), (0, 0))
                    available.add_metric(key, best)
                    regret.add_metric(key, lost)
            cached, prompt = usage.get(name, (0, 0))
            if prompt:
                hit_rate.add_metric([name], cached / prompt)
        yield from (in_flight, healthy, routed, by_prefix, fallbacks, available, regret, hit_rate)
