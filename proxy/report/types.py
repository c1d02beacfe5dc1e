"""The parts of a :class:`~promptcache.proxy.report.Report`: per-group summaries, the timeline,
break reasons, wasted writes, TTFT and ``price_as`` rows.

They live apart from the package's ``__init__`` so that the advisor (:mod:`.advice`), which reads
them, and the report, which calls the advisor, do not import each other.
``promptcache.proxy.report`` re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BreakReasonSummary",
    "PricedAs",
    "Summary",
    "TimelinePoint",
    "TtftSummary",
    "WastedWrites",
]


@dataclass(frozen=True)
class Summary:
    """Traffic, cache use and money of one group (or of everything, ``group=None``).

    Hit rates are fractions in [0, 1] (None without input tokens); tokens are counts; money USD.
    """

    group: str | None
    requests: int
    requests_with_usage: int
    hit_requests: int
    token_hit_rate: float | None
    request_hit_rate: float | None
    uncached_input_tokens: int
    cache_read_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    cache_write_unknown_tokens: int
    output_tokens: int
    total_input_tokens: int
    cost_usd: float
    cost_without_cache_usd: float
    net_savings_usd: float
    unpriced_requests: int
    errors: int
    breaks: int
    unexpected_misses: int
    new_prefixes: int = 0

    @property
    def cache_write_tokens(self) -> int:
        """All cache-write tokens, every TTL."""
        writes = (self.cache_write_5m_tokens, self.cache_write_1h_tokens)
        return sum(writes) + self.cache_write_unknown_tokens

    @property
    def all_unpriced(self) -> bool:
        """Whether there are requests with usage and every one is unpriced: the dollars of
        these requests are unknown, not $0."""
        return bool(self.unpriced_requests) and self.unpriced_requests >= self.requests_with_usage


@dataclass(frozen=True)
class PricedAs:
    """Requests for ``model``, which has no price row, that the proxy priced at ``priced_as``'s
    rates (the upstream's ``price_as`` setting); their cost is in every cost figure."""

    model: str | None
    priced_as: str
    requests: int


@dataclass(frozen=True)
class TimelinePoint:
    """One time bucket for the charts: start (unix s), token-weighted hit rate, spend (USD)."""

    start: float
    requests: int
    hit_rate: float | None
    cost_usd: float
    cost_without_cache_usd: float


@dataclass(frozen=True)
class BreakReasonSummary:
    """All breaks of one reason in the window.

    Attributes:
        reason: a ``breaks.BREAK_REASONS`` code.
        breaks: how many requests were explained by it.
        tokens_lost: input tokens a stable prefix would have served from cache (:mod:`.rollup`).
        usd_lost: what those tokens cost minus what reading them would have cost (input or
            write rate - cache-read rate), USD, priced models only.
        top_segment: the segment path that broke most often for this reason (None for reasons
            without a segment, such as ``ttl_expired``), with ``top_segment_breaks`` its count.
        example_ids: request ids with the most tokens lost.
        unpriced_breaks: how many of ``breaks`` are of a model without a price row (and no
            ``price_as`` stand-in), whose dollars are in no ``usd_lost``.
    """

    reason: str
    breaks: int
    tokens_lost: int
    usd_lost: float
    top_segment: str | None
    top_segment_breaks: int
    example_ids: tuple[str, ...]
    unpriced_breaks: int = 0

    @property
    def all_unpriced(self) -> bool:
        """Whether every break of this reason is of an unpriced model: its dollars lost are
        unknown, not $0."""
        return bool(self.unpriced_breaks) and self.unpriced_breaks >= self.breaks


@dataclass(frozen=True)
class WastedWrites:
    """Cache writes never read within their TTL: tokens, requests, and the premium paid (USD).

    ``unpriced_requests`` of the ``requests`` are of a model without a price row (and no
    ``price_as`` stand-in): their premium is in no ``premium_usd``."""

    tokens: int
    requests: int
    premium_usd: float
    unpriced_requests: int = 0

    @property
    def all_unpriced(self) -> bool:
        """Whether every wasted write is of an unpriced model: the premium is unknown, not $0."""
        return bool(self.unpriced_requests) and self.unpriced_requests >= self.requests


@dataclass(frozen=True)
class TtftSummary:
    """TTFT percentiles (ms) of successful requests with (``hit``) or without cache reads."""

    hit: bool
    requests: int
    p50_ms: float
    p95_ms: float
