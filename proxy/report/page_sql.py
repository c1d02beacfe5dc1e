"""The SQL behind the HTML report's page (:mod:`.report.page`); every aggregate is SQLite's.

The page needs finer grain than the hourly rollups keep (breaks per chart bucket, per-family
cost, where in a segment a prompt diverged, TTFT histograms), so these read ``requests`` over
the report's exact window ``[t0, t1)`` of unix seconds through ``idx_requests_started_at`` (and
the partial break-reason and TTFT indexes); the family ranking reads the family rollup over the
same exact window (:mod:`.report.window`). The chart buckets' traffic is the report's own
timeline (:func:`.report.queries.timeline`). Rows are counted as the rollups count them
(:mod:`.rollup`): money is ``CAST(cost_usd AS REAL)`` (NULL for unpriced models: not in any
sum), a cache *hit* reads at least one input token from the cache, and ``new_prefix`` is not a
break.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from ..rollup import FAMILY_INDEX, FAMILY_KEY
from .window import FAMILIES, Window

__all__ = [
    "NOT_A_BREAK",
    "TTFT_EDGES_MS",
    "DivergenceRow",
    "FamilyCostRow",
    "LayoutRow",
    "SegmentBreakRow",
    "bucket_breaks",
    "divergence_groups",
    "family_candidates",
    "family_cost",
    "family_top_reasons",
    "latest_layout",
    "segment_breaks",
    "ttft_histogram",
    "unplaced_breaks",
]

#: The explainer's code for the first request of a prefix family: not a break.
NOT_A_BREAK: Final = "new_prefix"
_WINDOW: Final = "started_at >= :t0 AND started_at < :t1"
_BREAK: Final = f"break_reason IS NOT NULL AND break_reason != '{NOT_A_BREAK}'"
_COST: Final = "CAST(cost_usd AS REAL)"
_COST_WITHOUT: Final = "CAST(cost_without_cache_usd AS REAL)"

#: TTFT histogram bin edges (ms), a 1-2-5 ladder from 1 ms to 60 s; below 1 ms falls in the
#: first bin and above 60 s in the last.
TTFT_EDGES_MS: Final[tuple[float, ...]] = (
    0.0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000,
)  # fmt: skip


def bucket_breaks(
    conn: sqlite3.Connection, t0: float, t1: float, origin: float, size: float
) -> list[tuple[int, str, int]]:
    """(bucket index, reason, breaks) for every reason with breaks in a bucket of ``[t0, t1)``."""
    sql = f"""
        SELECT CAST((started_at - :origin) / :size AS INTEGER) AS i, break_reason, COUNT(*)
        FROM requests INDEXED BY idx_requests_break_reason
        WHERE {_BREAK} AND {_WINDOW} GROUP BY i, break_reason ORDER BY i, break_reason
    """
    params = {"t0": t0, "t1": t1, "origin": origin, "size": size}
    return [(int(i), str(reason), int(n)) for i, reason, n in conn.execute(sql, params)]


@dataclass(frozen=True)
class LayoutRow:
    """A request's prompt layout: ``segment_hashes`` and ``breakpoints`` JSON as logged."""

    request_id: str
    segments_json: str
    breakpoints_json: str | None
    approx_prefix_tokens: int | None
    #: the upstream's count of the request's input tokens, from its usage (None without usage)
    total_input_tokens: int | None = None


def latest_layout(
    conn: sqlite3.Connection, t0: float, t1: float, reason: str | None
) -> LayoutRow | None:
    """The latest successful request in ``[t0, t1)`` with a logged layout; with ``reason``, the
    latest that broke for it (None when there is none)."""
    # "1 = 1", not "1": Postgres takes no integer as a truth value
    where = "break_reason = :reason" if reason is not None else "1 = 1"
    index = f"INDEXED BY idx_requests_{'break_reason' if reason is not None else 'started_at'}"
    sql = f"""
        SELECT id, segment_hashes, breakpoints, approx_prefix_tokens, total_input_tokens
        FROM requests {index}
        WHERE {where} AND {_WINDOW} AND segment_hashes IS NOT NULL
          AND status >= 200 AND status < 300
        ORDER BY started_at DESC LIMIT 1
    """
    row = conn.execute(sql, {"t0": t0, "t1": t1, "reason": reason}).fetchone()
    return None if row is None else LayoutRow(*row)


@dataclass(frozen=True)
class SegmentBreakRow:
    """Breaks whose first change is at ``offset`` (chars, None if unknown) of ``segment``."""

    segment: str
    offset: int | None
    breaks: int


def segment_breaks(conn: sqlite3.Connection, t0: float, t1: float) -> list[SegmentBreakRow]:
    """Breaks per (break segment, offset) in ``[t0, t1)``, most first."""
    sql = f"""
        SELECT break_segment, break_offset, COUNT(*) AS n
        FROM requests INDEXED BY idx_requests_break_reason
        WHERE {_BREAK} AND {_WINDOW} AND break_segment IS NOT NULL
        GROUP BY break_segment, break_offset ORDER BY n DESC, break_segment, break_offset
    """
    return [SegmentBreakRow(*row) for row in conn.execute(sql, {"t0": t0, "t1": t1})]


def unplaced_breaks(conn: sqlite3.Connection, t0: float, t1: float) -> dict[str, int]:
    """Breaks without a segment (``ttl_expired``, ``model_changed``...) per reason."""
    sql = f"""
        SELECT break_reason, COUNT(*) FROM requests INDEXED BY idx_requests_break_reason
        WHERE {_BREAK} AND {_WINDOW} AND break_segment IS NULL GROUP BY break_reason
    """
    return {str(r): int(n) for r, n in conn.execute(sql, {"t0": t0, "t1": t1})}


@dataclass(frozen=True)
class DivergenceRow:
    """Breaks of one (reason, segment, offset) with an excerpt, and the latest one's excerpt."""

    reason: str
    segment: str | None
    offset: int | None
    breaks: int
    request_id: str
    excerpt: str


def divergence_groups(conn: sqlite3.Connection, t0: float, t1: float) -> list[DivergenceRow]:
    """Breaks with a stored excerpt per (reason, segment, offset), most first; each row carries
    the excerpt of its latest request (window functions, so Postgres runs the same SQL)."""
    sql = f"""
        SELECT break_reason, break_segment, break_offset, n, id, break_excerpt FROM (
          SELECT break_reason, break_segment, break_offset, id, break_excerpt,
            COUNT(*) OVER (PARTITION BY break_reason, break_segment, break_offset) AS n,
            ROW_NUMBER() OVER (PARTITION BY break_reason, break_segment, break_offset
                               ORDER BY started_at DESC, id DESC) AS latest
          FROM requests INDEXED BY idx_requests_break_reason
          WHERE {_BREAK} AND {_WINDOW} AND break_excerpt IS NOT NULL) AS b
        WHERE latest = 1
        ORDER BY n DESC, break_reason, break_segment, break_offset
    """
    return [DivergenceRow(*row[:6]) for row in conn.execute(sql, {"t0": t0, "t1": t1})]


@dataclass(frozen=True)
class FamilyCostRow:
    """One prefix family (same key and model, requests sharing a prefix: ``first_segment_hash``
    is the family's id, ``requests.prefix_family``) in the window: requests, tokens, USD over
    its priced requests."""

    key_fingerprint: str | None
    model: str | None
    first_segment_hash: str
    requests: int
    cache_read_tokens: int
    total_input_tokens: int
    cost_usd: float
    cost_without_cache_usd: float


def family_candidates(
    conn: sqlite3.Connection, t0: float, t1: float, limit: int
) -> tuple[list[tuple[str | None, str | None, str]], int]:
    """The ``limit`` families with the most input tokens in ``[t0, t1)``, from the
    ``report_family_hourly`` rollup over the exact window (:data:`.report.window.FAMILIES`),
    and how many families there are in all."""
    window = Window(t0, t1).params(limit=limit)
    sql = f"""
        SELECT key_fingerprint, model, prefix_family FROM {FAMILIES}
        GROUP BY key_fingerprint, model, prefix_family
        ORDER BY SUM(input_tokens) DESC, prefix_family LIMIT :limit
    """
    rows = [(key or None, model or None, first) for key, model, first in conn.execute(sql, window)]
    total = conn.execute(
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {FAMILIES} "
        "GROUP BY key_fingerprint, model, prefix_family)",
        window,
    ).fetchone()[0]
    return rows, int(total)


_FAMILY: Final = (
    f"key_fingerprint IS :key AND model IS :model AND {FAMILY_KEY.format(r='requests')} = :first"
)


def family_cost(
    conn: sqlite3.Connection,
    t0: float,
    t1: float,
    family: tuple[str | None, str | None, str],
) -> FamilyCostRow:
    """One family's requests, tokens and spend in ``[t0, t1)`` (through its index)."""
    key, model, first = family
    sql = f"""
        SELECT COUNT(*), CAST(TOTAL(cache_read_tokens) AS INTEGER),
          CAST(TOTAL(total_input_tokens) AS INTEGER), TOTAL({_COST}), TOTAL({_COST_WITHOUT})
        FROM requests INDEXED BY {FAMILY_INDEX} WHERE {_FAMILY} AND {_WINDOW}
    """
    params = {"t0": t0, "t1": t1, "key": key, "model": model, "first": first}
    return FamilyCostRow(key, model, first, *conn.execute(sql, params).fetchone())


def family_top_reasons(
    conn: sqlite3.Connection, t0: float, t1: float
) -> dict[tuple[str | None, str | None, str], tuple[str, int]]:
    """Per family (key, model, first segment hash): its most frequent break reason in
    ``[t0, t1)`` and its count (ties: the reason first in alphabetical order). One pass over
    the break rows (``idx_requests_break_reason``): cheaper than one query per family."""
    sql = f"""
        SELECT key_fingerprint, model, {FAMILY_KEY.format(r="requests")} AS family,
          break_reason, COUNT(*) AS n
        FROM requests INDEXED BY idx_requests_break_reason
        WHERE {_BREAK} AND {_WINDOW} AND first_segment_hash IS NOT NULL
        GROUP BY key_fingerprint, model, family, break_reason
        ORDER BY n DESC, break_reason
    """
    out: dict[tuple[str | None, str | None, str], tuple[str, int]] = {}
    for key, model, first, reason, n in conn.execute(sql, {"t0": t0, "t1": t1}):
        out.setdefault((key, model, first), (str(reason), int(n)))
    return out


def ttft_histogram(conn: sqlite3.Connection, t0: float, t1: float) -> dict[bool, list[int]]:
    """Counts of successful (2xx-3xx) requests per :data:`TTFT_EDGES_MS` bin, for cache hits
    (``True``: read >= 1 cached token) and misses; ``len(TTFT_EDGES_MS) - 1`` bins each.

    SQLite counts the requests under each inner edge in one pass over ``idx_requests_ttft``,
    grouped by class in index order (a ``GROUP BY`` on the bin would sort every row first:
    4x slower on 200,000 rows); the bins are the differences.
    """
    inner = TTFT_EDGES_MS[1:-1]
    below = ", ".join(f"TOTAL(CASE WHEN ttft_ms < {edge} THEN 1 ELSE 0 END)" for edge in inner)
    sql = f"""
        SELECT cache_read_tokens > 0, {below}, COUNT(*)
        FROM requests INDEXED BY idx_requests_ttft
        WHERE ttft_ms IS NOT NULL AND cache_read_tokens IS NOT NULL
          AND status >= 200 AND status < 400 AND {_WINDOW}
        GROUP BY 1
    """
    out = {True: [0] * (len(TTFT_EDGES_MS) - 1), False: [0] * (len(TTFT_EDGES_MS) - 1)}
    for hit, *cumulative in conn.execute(sql, {"t0": t0, "t1": t1}):
        counts = [0, *(int(c) for c in cumulative)]
        out[bool(hit)] = [counts[i + 1] - counts[i] for i in range(len(counts) - 1)]
    return out
