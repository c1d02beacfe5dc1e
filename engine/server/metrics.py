"""Prometheus metrics of the engine server (``GET /metrics``), in the server's own registry.

Gauges and cumulative counters are read from the engine's latest ``EngineStats`` snapshot at
scrape time (a custom collector, so the engine thread never updates them one by one);
histograms and per-outcome counters are recorded by ``AsyncEngine`` on the engine thread.

==================================================  =========  ==================================
``promptcache_engine_running_sequences``            gauge      sequences in the running batch
``promptcache_engine_waiting_sequences``            gauge      sequences waiting for admission
``promptcache_engine_swapped_sequences``            gauge      sequences swapped out to CPU
``promptcache_engine_requests_in_flight``           gauge      HTTP requests admitted, unfinished
``promptcache_engine_kv_cache_usage_ratio``         gauge      device KV blocks in use, 0..1
``promptcache_engine_kv_cache_free_blocks``         gauge      free device KV blocks
``promptcache_engine_kv_cache_bytes``               gauge      bytes allocated for the KV pool
``promptcache_engine_prefix_cache_queries_tokens``  counter    prompt tokens looked up
``promptcache_engine_prefix_cache_hits_tokens``     counter    of those, found in the cache
``promptcache_engine_prefix_cache_tier_hits_tokens`` counter   hits by ``tier`` (pool, ram, disk)
``promptcache_engine_kv_tier_blocks``               gauge      blocks held per ``tier`` (ram, disk)
``promptcache_engine_preemptions``                  counter    sequences preempted
``promptcache_engine_prompt_tokens``                counter    prompt tokens admitted
``promptcache_engine_generation_tokens``            counter    tokens generated
``promptcache_engine_spec_decode_num_drafts``       counter    decode steps verifying drafts
``promptcache_engine_spec_decode_num_draft_tokens`` counter    draft tokens proposed
``promptcache_engine_spec_decode_num_accepted_tokens`` counter of those, tokens output
``promptcache_engine_sequences_finished``           counter    per ``finish_reason``
``promptcache_engine_requests``                     counter    HTTP requests per ``outcome``
``promptcache_engine_ttft_seconds``                 histogram  arrival to first token
``promptcache_engine_inter_token_latency_seconds``  histogram  gap between tokens of a sequence
``promptcache_engine_request_latency_seconds``      histogram  arrival to last token (or abort)
==================================================  =========  ==================================

Counters get the ``_total`` suffix on the wire, as prometheus-client writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from ..outputs import EngineStats

__all__ = ["CONTENT_TYPE", "EngineMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The ``Content-Type`` of ``EngineMetrics.render()``."""

#: TTFT buckets in seconds (a prefix-cache hit shows up here).
TTFT_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32)
#: Inter-token latency buckets in seconds.
ITL_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
#: Whole-request latency buckets in seconds.
REQUEST_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

_PREFIX = "promptcache_engine_"


class EngineMetrics:
    """The server's Prometheus series.

    Args:
        stats: returns the latest ``EngineStats`` (called at scrape time, from the event loop).
        in_flight: returns how many HTTP requests are admitted and unfinished.
        registry: where the series live; a fresh ``CollectorRegistry`` when omitted, so two
            servers in one process never share series.
    """

    def __init__(
        self,
        stats: Callable[[], EngineStats],
        in_flight: Callable[[], int],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registry.register(_StatsCollector(stats, in_flight))
        self.ttft = Histogram(
            _PREFIX + "ttft_seconds",
            "Time from request arrival to its first generated token.",
            buckets=TTFT_BUCKETS_S,
            registry=self.registry,
        )
        self.itl = Histogram(
            _PREFIX + "inter_token_latency_seconds",
            "Time between consecutive generated tokens of one sequence.",
            buckets=ITL_BUCKETS_S,
            registry=self.registry,
        )
        self.request_latency = Histogram(
            _PREFIX + "request_latency_seconds",
            "Time from request arrival to its last token, abort or error.",
            buckets=REQUEST_BUCKETS_S,
            registry=self.registry,
        )
        self.sequences_finished = Counter(
            _PREFIX + "sequences_finished",
            "Sequences (one per sample) that finished, by finish_reason (stop, length).",
            ["finish_reason"],
            registry=self.registry,
        )
        self.requests = Counter(
            _PREFIX + "requests",
            "HTTP generation requests that ended, by outcome (finished, abort, error).",
            ["outcome"],
            registry=self.registry,
        )

    def request_done(self, outcome: str, latency_s: float) -> None:
        """Count one ended HTTP request and record its latency in seconds."""
        self.requests.labels(outcome).inc()
        self.request_latency.observe(latency_s)

    def render(self) -> bytes:
        """The exposition text of every series (``Content-Type: CONTENT_TYPE``)."""
        return bytes(generate_latest(self.registry))


class _StatsCollector(Collector):
    """Gauges and counters copied from the latest engine stats at scrape time."""

    def __init__(self, stats: Callable[[], EngineStats], in_flight: Callable[[], int]) -> None:
        self._stats = stats
        self._in_flight = in_flight

    def collect(self) -> Iterator[Metric]:
        s = self._stats()
        gauges = (
            ("running_sequences", "Sequences in the running batch.", s.num_running),
            ("waiting_sequences", "Sequences waiting for admission.", s.num_waiting),
            ("swapped_sequences", "Sequences swapped out to the CPU pool.", s.num_swapped),
            ("requests_in_flight", "HTTP requests admitted and unfinished.", self._in_flight()),
            ("kv_cache_usage_ratio", "Fraction of device KV blocks in use (0..1).", s.kv_usage),
            ("kv_cache_free_blocks", "Free device KV blocks.", s.num_free_blocks),
            ("kv_cache_bytes", "Bytes allocated for the device KV pool.", s.kv_cache_bytes),
        )
        for name, doc, value in gauges:
            yield GaugeMetricFamily(_PREFIX + name, doc, value=value)
        counters = (
            (
                "prefix_cache_queries_tokens",
                "Prompt tokens looked up in the prefix cache.",
                s.prefix_cache_queries_tokens,
            ),
            (
                "prefix_cache_hits_tokens",
                "Prompt tokens found in the prefix cache.",
                s.prefix_cache_hits_tokens,
            ),
            ("preemptions", "Sequences preempted to free KV blocks.", s.num_preemptions),
            ("prompt_tokens", "Prompt tokens admitted.", s.num_prompt_tokens),
            ("generation_tokens", "Tokens generated.", s.num_generated_tokens),
            (
                "spec_decode_num_drafts",
                "Decode steps that verified prompt-lookup draft tokens (speculative decoding).",
                s.spec_decode_num_drafts,
            ),
            (
                "spec_decode_num_draft_tokens",
                "Draft tokens proposed and verified (speculative decoding).",
                s.spec_decode_num_draft_tokens,
            ),
            (
                "spec_decode_num_accepted_tokens",
                "Draft tokens the model confirmed that became output (speculative decoding).",
                s.spec_decode_num_accepted_tokens,
            ),
        )
        for name, doc, value in counters:
            yield CounterMetricFamily(_PREFIX + name, doc, value=value)
        tier_hits = CounterMetricFamily(
            _PREFIX + "prefix_cache_tier_hits_tokens",
            "Prompt tokens found in the prefix cache, by the tier that held them (pool: the KV "
            "pool; ram, disk: the cache tiers below it). They sum to prefix_cache_hits_tokens.",
            labels=["tier"],
        )
        for tier, value in s.prefix_cache_hits_tokens_by_tier.items():
            tier_hits.add_metric([tier], value)
        yield tier_hits
        if s.kv_tier_blocks:
            blocks = GaugeMetricFamily(
                _PREFIX + "kv_tier_blocks",
                "KV blocks held by each cache tier below the pool.",
                labels=["tier"],
            )
            for tier, value in s.kv_tier_blocks.items():
                blocks.add_metric([tier], value)
            yield blocks
