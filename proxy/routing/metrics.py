"""Prometheus series of the routers, read from their state when ``/metrics`` is scraped.

==========================================  =========  ==========================================
``promptcache_replica_in_flight``           gauge      requests in flight per replica
``promptcache_replica_healthy``             gauge      1 while the replica is in rotation
``promptcache_routed_total``                counter    requests routed, by ``reason``
                                                       (prefix, new_prefix, overloaded,
                                                       least_loaded, round_robin, kv_events,
                                                       retry)
``promptcache_routed_by_prefix_total``      counter    routed to the replica holding their prefix
``promptcache_route_fallbacks_total``       counter    not sent where the policy preferred:
                                                       ``kind="overloaded"`` (load margin) or
                                                       ``kind="retry"`` (another replica failed)
==========================================  =========  ==========================================

All are labelled ``upstream`` (the upstream's name) and ``replica`` (its base URL).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .router import Router

__all__ = ["RoutingCollector"]

_FALLBACKS = ("overloaded", "retry")


class RoutingCollector(Collector):
    """The series above for ``routers`` (an iterable of ``Router``)."""

    def __init__(self, routers: Iterable[Router]) -> None:
        self.routers = list(routers)

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
            "Requests routed to the replica that held their longest prefix.",
            labels=labels,
        )
        fallbacks = CounterMetricFamily(
            "promptcache_route_fallbacks",
            "Requests not sent where the policy preferred: the load margin was exceeded "
            "(overloaded) or another replica failed before the response started (retry).",
            labels=[*labels, "kind"],
        )
        for router in self.routers:
            for replica in router.replicas:
                key = [router.upstream.name, replica.url]
                in_flight.add_metric(key, replica.in_flight)
                healthy.add_metric(key, int(replica.healthy))
                for reason, count in sorted(replica.routed_by_reason.items()):
                    routed.add_metric([*key, reason], count)
                by_prefix.add_metric(key, replica.routed_by_reason.get("prefix", 0))
                for kind in _FALLBACKS:
                    fallbacks.add_metric([*key, kind], replica.routed_by_reason.get(kind, 0))
        yield from (in_flight, healthy, routed, by_prefix, fallbacks)
