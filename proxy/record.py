"""``RequestRecord``: everything the proxy learns about one request, one row of ``requests``.

The proxy fills a record while it forwards a request, then passes it to each callable in
``app.state.record_hooks`` (the cache-break explainer, the Prometheus metrics) and finally to the
background writer. Column attributes map 1:1 onto the ``requests`` table (proxy/store.py); the
parsed ``fingerprint``, ``usage`` and ``cost`` objects ride along for hooks and are not stored as
such. Times are unix seconds (``time.time()``), durations milliseconds, money USD as
``Decimal`` text, token counts ``int``.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from promptcache.usage import USAGE_TOKEN_COLUMNS

if TYPE_CHECKING:
    from promptcache.fingerprint import RequestFingerprint
    from promptcache.pricing import CostBreakdown
    from promptcache.usage import Usage

__all__ = ["COLUMN_NAMES", "RequestRecord", "new_request_id"]


def _column(default: Any = None) -> Any:
    return field(default=default, metadata={"column": True})


@dataclass
class RequestRecord:
    """One proxied request. Column fields are documented in docs/proxy.md ("The log")."""

    # identity and timing
    id: str = _column()
    started_at: float = _column()
    first_byte_at: float | None = _column()
    ended_at: float | None = _column()
    ttft_ms: float | None = _column()
    latency_ms: float | None = _column()
    # what was called
    vendor: str | None = _column()
    api: str | None = _column()
    route: str | None = _column()
    upstream: str | None = _column()
    model: str | None = _column()
    key_fingerprint: str | None = _column()
    status: int | None = _column()
    error: str | None = _column()
    stream: int = _column(0)
    # usage, normalised (NULL when the response carried none)
    uncached_input_tokens: int | None = _column()
    cache_read_tokens: int | None = _column()
    cache_write_5m_tokens: int | None = _column()
    cache_write_1h_tokens: int | None = _column()
    cache_write_unknown_tokens: int | None = _column()
    output_tokens: int | None = _column()
    reasoning_tokens: int | None = _column()
    total_input_tokens: int | None = _column()
    usage_json: str | None = _column()
    usage_warnings: str | None = _column()
    # money (Decimal as text; NULL when the model has no price)
    vendor_cost_usd: str | None = _column()
    cost_usd: str | None = _column()
    cost_without_cache_usd: str | None = _column()
    # prefix
    segment_hashes: str | None = _column()
    prefix_hash: str | None = _column()
    first_segment_hash: str | None = _column()
    approx_prefix_tokens: int | None = _column()
    breakpoints: str | None = _column()
    # filled by the cache-break explainer hook (proxy/breaks.py)
    break_reason: str | None = _column()
    break_segment: str | None = _column()
    break_offset: int | None = _column()
    break_excerpt: str | None = _column()
    previous_request_id: str | None = _column()
    expected_hit: int | None = _column()
    unexpected_miss: int | None = _column()
    vendor_miss_reason: str | None = _column()
    # bodies, only with --store-bodies (credentials redacted)
    request_body: str | None = _column()
    response_body: str | None = _column()
    # the price-table model whose rates priced a model without its own row (upstream price_as);
    # last because schema step 4 appends it to older logs
    priced_as: str | None = _column()
    # routing over an upstream's replicas (proxy/routing/); schema step 5, NULL without replicas
    replica: str | None = _column()
    route_policy: str | None = _column()
    route_reason: str | None = _column()
    route_depth: int | None = _column()
    route_in_flight: int | None = _column()
    route_least_in_flight: int | None = _column()
    route_attempts: int | None = _column()
    # routing regret (schema step 8): prompt tokens the best-matching replica held and those the
    # chosen one held, as the policy estimated them (exact for kv_events); NULL when unknown
    route_best_tokens: int | None = _column()
    route_chosen_tokens: int | None = _column()
    # the prefix family (schema step 9): the first segment hash of the first request of the
    # requests the break explainer found sharing a prefix with this one (proxy/breaks.py)
    prefix_family: str | None = _column()
    # the vendors' own cache diagnostics (schema step 10, proxy/diagnostics.py): the response's
    # id, the id the request named for the vendor's comparison (Anthropic
    # diagnostics.previous_message_id, OpenAI prompt_cache_options.comparison_response_id), 1
    # when the proxy added it itself (--vendor-diagnostics), and the vendor's estimate of the
    # input tokens its cache missed
    response_id: str | None = _column()
    vendor_comparison_id: str | None = _column()
    vendor_diagnostics_added: int | None = _column()
    vendor_cache_missed_tokens: int | None = _column()

    # not stored: parsed objects for hooks
    fingerprint: RequestFingerprint | None = field(default=None, repr=False, compare=False)
    usage: Usage | None = field(default=None, repr=False, compare=False)
    cost: CostBreakdown | None = field(default=None, repr=False, compare=False)
    request_json: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    #: tokens the cache break lost (``breaks.tokens_lost``), set by the explainer for the
    #: metrics hook; the report recomputes it from the rows (``proxy/rollup.py``)
    break_tokens_lost: int | None = field(default=None, repr=False, compare=False)
    #: the model the response names (``model``; Gemini's ``modelVersion``), for the span export
    response_model: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def begin(cls, started_at: float, route: str | None, api: str | None) -> RequestRecord:
        """A new record of a request that just arrived: ``RequestRecord(id="", started_at=...,
        route=..., api=...)``, every other field at its default, built by copying the defaults
        in one C call instead of the generated ``__init__``'s 64 assignments (the proxy makes
        one per request before forwarding it). Every default is immutable, so nothing is
        shared between records."""
        record = object.__new__(cls)
        fields = record.__dict__
        fields.update(_BLANK)
        fields["started_at"] = started_at
        fields["route"] = route
        fields["api"] = api
        return record

    def as_row(self) -> dict[str, Any]:
        """The column values, keyed by column name, ready for ``Table.insert_all``."""
        return dict(zip(COLUMN_NAMES, _column_values(self), strict=True))

    def set_usage_columns(self, usage: Usage) -> None:
        """Copy a normalised ``Usage`` into the usage columns (and keep the object)."""
        self.usage = usage
        for name in (*USAGE_TOKEN_COLUMNS, "reasoning_tokens", "total_input_tokens"):
            setattr(self, name, getattr(usage, name))
        self.usage_json = _USAGE_ENCODER.encode(usage.raw)
        warnings = list(usage.warnings)  # strings: key order does not arise
        self.usage_warnings = _USAGE_ENCODER.encode(warnings) if warnings else "[]"


#: ``json.dumps(..., ensure_ascii=False, sort_keys=True)``, built once (``json.dumps`` builds
#: an encoder per call when given options).
_USAGE_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)

#: The stored columns, in table order.
COLUMN_NAMES: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(RequestRecord) if f.metadata.get("column")
)
#: Every field of a new record (``RequestRecord.begin``), in ``__init__``'s order: the
#: defaults, ``id`` empty. A field with a default factory (a mutable default) would need its own
#: object per record, and ``begin`` would be wrong: none has one (checked here).
_BLANK: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(RequestRecord)}
_BLANK["id"] = ""
if any(f.default_factory is not dataclasses.MISSING for f in dataclasses.fields(RequestRecord)):
    raise TypeError("RequestRecord.begin copies defaults: a default factory needs its own object")
#: A record's column values in ``COLUMN_NAMES`` order, read in one C call.
_column_values = operator.attrgetter(*COLUMN_NAMES)


def new_request_id() -> str:
    """A new request id: a UUIDv7 (RFC 9562, section 5.7) as 32 lowercase hex digits.

    The first 48 bits are the unix time in ms, so ids sort by arrival (to the millisecond) and
    the log's primary-key index grows at its end instead of at random pages: with 50,000 rows
    logged an insert costs about 25 us of SQLite CPU instead of 37 us with random (v4) ids, and
    the gap widens as the file grows. The other 74 bits (after the version and variant bits)
    are random from ``os.urandom``, read 4,090 bytes (409 ids) at a time: one system call per
    409 ids instead of one per id (a forked child reads its own).
    """
    ms = time.time_ns() // 1_000_000
    while True:
        try:
            rand = _RANDOMS.pop()  # 80 bits, 74 of them used; atomic, so threads need no lock
            break
        except IndexError:
            _refill_randoms()
    value = (
        (ms & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76  # version 7
        | (rand >> 68) << 64  # 12 random bits (rand_a)
        | 0b10 << 62  # RFC 9562 variant
        | rand & ((1 << 62) - 1)  # 62 random bits (rand_b)
    )
    return f"{value:032x}"


#: 80-bit random numbers ``new_request_id`` has not used yet (each is used once).
_RANDOMS: list[int] = []
_RANDOMS_A_READ = 409


def _refill_randoms() -> None:
    """Add ``_RANDOMS_A_READ`` numbers to ``_RANDOMS`` from one ``os.urandom`` read."""
    data = os.urandom(10 * _RANDOMS_A_READ)
    _RANDOMS.extend(int.from_bytes(data[i : i + 10], "big") for i in range(0, len(data), 10))


if hasattr(os, "register_at_fork"):  # a child must not hand out its parent's numbers again
    os.register_at_fork(after_in_child=_RANDOMS.clear)
