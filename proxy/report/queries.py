"""The SQL behind ``promptcache report``; every aggregate is computed by SQLite.

Most figures come from the hourly rollups that triggers keep beside ``requests``
(:mod:`.rollup`), so their cost grows with hours x groups, not with requests. Windows are exact,
``[since, until)`` (:class:`.report.window.Window`): the whole hours inside come from the
rollups, the partial hours at the edges from the same sums computed over their requests
(:data:`.report.window.HOURLY` and friends). Besides those edges, only a few things touch
``requests`` itself, each through an index: TTFT percentiles (a partial index in (hit, ttft)
order, read inside one bucket of the TTFT histogram rollup), example ids per break reason (a
partial index on break rows), the TTL advisor's counts over the busiest prefix families (the
gap rollup for whole hours, the family gap index for the edge hours and the 1-hour walk),
writes still waiting for their TTL to run out, and sub-hour timeline buckets (the
start-time index). Functions return short lists of plain rows.

Definitions (shared with :mod:`.rollup`):

- *token-weighted hit rate* = sum(cache_read_tokens) / sum(total_input_tokens);
- *request-weighted hit rate* = mean over requests with input of cache_read / total_input;
- *wasted write tokens* = write tokens - read-back tokens - tokens still *pending* (written less
  than one TTL before ``now`` by a request whose family has had no later successful request
  yet: a failed one, which reads nothing, is no successor).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, fields
from typing import Final

from promptcache.ttl import LIFETIME_S, TTLWriteCounts

from ..gap_rollup import GAPS_INDEX, SEGMENTS, family_match
from ..rollup import FAMILY_KEY
from ..ttft_rollup import BUCKET_MS
from .window import BREAKS, FAMILIES, HOURLY, IN_WINDOW, TTFT, Window

__all__ = [
    "BLOCK_CACHE_VENDORS",
    "GROUP_BY_SQL",
    "BreakGroupRow",
    "FamilyRow",
    "GroupRow",
    "PricedAsRow",
    "TimelineRow",
    "TtftRow",
    "WasteRow",
    "automatic_breaks",
    "break_examples",
    "break_groups",
    "busiest_families",
    "engine_breaks",
    "family_start_times",
    "family_write_counts",
    "group_totals",
    "new_prefixes",
    "priced_as",
    "timeline",
    "traffic_span",
    "ttft_percentiles",
    "wasted_writes",
]


def _none(column: str) -> str:
    return f"CASE WHEN {column} = '' THEN '(none)' ELSE {column} END"


#: ``--group-by`` value -> the SQL expression over ``report_hourly`` a row is grouped under.
GROUP_BY_SQL: Final[dict[str, str]] = {
    "model": _none("model"),
    "route": _none("route"),
    "key": _none("key_fingerprint"),
    "day": "strftime('%Y-%m-%d', hour * 3600, 'unixepoch')",
    "hour": "strftime('%Y-%m-%d %H:00', hour * 3600, 'unixepoch')",
}

_ROWS = IN_WINDOW


@dataclass(frozen=True)
class GroupRow:
    """Additive sums over one group (``group`` None: all rows). Tokens are counts, money USD."""

    group: str | None
    requests: int
    requests_with_usage: int
    requests_with_input: int
    hit_requests: int
    hit_ratio_sum: float
    uncached_input_tokens: int
    cache_read_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    cache_write_unknown_tokens: int
    output_tokens: int
    total_input_tokens: int
    cost_usd: float
    cost_without_cache_usd: float
    unpriced_requests: int
    errors: int
    breaks: int
    unexpected_misses: int


# The hourly rollup columns summed for a GroupRow, in its field order (after ``group``): the
# dataclass is the one list of them, so the SELECT and the row cannot drift apart.
_SUMS = ", ".join(f"COALESCE(SUM({f.name}), 0)" for f in fields(GroupRow)[1:])


def group_totals(conn: sqlite3.Connection, w: Window, group_by: str | None) -> list[GroupRow]:
    """Sums per ``--group-by`` group, or one row (``group=None``) when ``group_by`` is None.

    Groups are ordered by request count, largest first; ``day``/``hour`` groups by time.
    """
    if group_by is None:
        row = conn.execute(f"SELECT {_SUMS} FROM {HOURLY}", w.params())
        return [GroupRow(None, *row.fetchone())]
    order = "grp" if group_by in ("day", "hour") else "2 DESC, grp"
    sql = f"""
        SELECT {GROUP_BY_SQL[group_by]} AS grp, {_SUMS} FROM {HOURLY}
        GROUP BY grp ORDER BY {order}
    """
    return [GroupRow(*row) for row in conn.execute(sql, w.params())]


#: The ``report_hourly`` key columns computed over a ``requests`` row, so that
#: :data:`GROUP_BY_SQL` groups raw rows exactly as it groups the rollup.
_ROW_KEYS: Final = """CAST(started_at / 3600 AS INTEGER) AS hour, COALESCE(model, '') AS model,
    COALESCE(route, '') AS route, COALESCE(key_fingerprint, '') AS key_fingerprint"""


def new_prefixes(
    conn: sqlite3.Connection, w: Window, group_by: str | None
) -> dict[str | None, int]:
    """Requests the explainer called ``new_prefix`` (the first of a prefix family: nothing
    earlier to reuse, so not a cache break), per ``--group-by`` group (key None when
    ``group_by`` is None). Read through ``idx_requests_break_reason``: such rows are few."""
    grp = "NULL" if group_by is None else GROUP_BY_SQL[group_by]
    sql = f"""
        SELECT {grp} AS grp, COUNT(*) FROM (
            SELECT {_ROW_KEYS} FROM requests INDEXED BY idx_requests_break_reason
            WHERE break_reason = 'new_prefix' AND {_ROWS})
        GROUP BY grp
    """
    return {grp: n for grp, n in conn.execute(sql, w.params())}


def engine_breaks(conn: sqlite3.Connection, w: Window) -> int:
    """Breaks on the engine upstream in the window whose reason counts tokens lost (all but
    ``new_prefix`` and ``below_minimum``, which lose none; a break's figure can still be 0).
    Read through ``idx_requests_break_reason``: breaks are few."""
    sql = f"""
        SELECT COUNT(*) FROM requests INDEXED BY idx_requests_break_reason
        WHERE break_reason IS NOT NULL AND break_reason NOT IN ('new_prefix', 'below_minimum')
          AND vendor = 'engine' AND {_ROWS}
    """
    n: int = conn.execute(sql, w.params()).fetchone()[0]
    return n


#: Upstreams whose own prefix cache holds whole blocks, not whole tokens, and whose breaks
#: :func:`automatic_breaks` counts (the engine upstream's are :func:`engine_breaks`).
BLOCK_CACHE_VENDORS: Final = ("openai", "openai_compatible")


def automatic_breaks(conn: sqlite3.Connection, w: Window) -> dict[str, int]:
    """Breaks in the window on the :data:`BLOCK_CACHE_VENDORS` upstreams whose tokens lost
    counts the predecessor's whole input as cached (the predecessor carried no breakpoint and
    reported no cache write: the upstream cached it by itself), by vendor; reasons as
    :func:`engine_breaks`. A break whose predecessor is no longer logged loses 0 and is left
    out. Read through ``idx_requests_break_reason``: breaks are few."""
    vendors = ", ".join(f"'{v}'" for v in BLOCK_CACHE_VENDORS)
    sql = f"""
        SELECT r.vendor, COUNT(*)
        FROM requests AS r INDEXED BY idx_requests_break_reason
          JOIN requests AS p ON p.id = r.previous_request_id
        WHERE r.break_reason IS NOT NULL
          AND r.break_reason NOT IN ('new_prefix', 'below_minimum')
          AND r.vendor IN ({vendors})
          AND r.started_at >= :t0 AND r.started_at < :t1
          AND COALESCE(p.api, '') NOT IN ('anthropic', 'bedrock_converse')
          AND COALESCE(p.breakpoints, '[]') = '[]'
          AND COALESCE(p.cache_write_5m_tokens, 0) + COALESCE(p.cache_write_1h_tokens, 0)
              + COALESCE(p.cache_write_unknown_tokens, 0) = 0
        GROUP BY r.vendor ORDER BY r.vendor
    """
    return {vendor: n for vendor, n in conn.execute(sql, w.params())}


@dataclass(frozen=True)
class TimelineRow:
    """One chart bucket: start (unix s, aligned to its size), requests, tokens, USD (priced
    requests only: an unpriced request's cost is NULL, in no sum)."""

    bucket_start: float
    requests: int
    cache_read_tokens: int
    total_input_tokens: int
    cost_usd: float
    cost_without_cache_usd: float


def traffic_span(conn: sqlite3.Connection, w: Window) -> tuple[float, float] | None:
    """(first, last) ``started_at`` of the requests in the window, or None without any (two
    index seeks on ``idx_requests_started_at``: one ``MIN``/``MAX`` each)."""
    first = conn.execute(f"SELECT MIN(started_at) FROM requests WHERE {_ROWS}", w.params())
    low = first.fetchone()[0]
    if low is None:
        return None
    high = conn.execute(f"SELECT MAX(started_at) FROM requests WHERE {_ROWS}", w.params())
    return float(low), float(high.fetchone()[0])


def timeline(
    conn: sqlite3.Connection, w: Window, origin: float, size: float
) -> list[tuple[int, TimelineRow]]:
    """Per ``size``-second bucket of the window, ``(index, row)`` with index
    ``floor((started_at - origin) / size)``, oldest first; empty buckets omitted.

    Buckets of whole hours (``size`` and ``origin`` multiples of 3600) are summed from
    :data:`.report.window.HOURLY` (rollup hours plus the edge requests), finer ones from
    ``requests`` through the start-time index.
    """
    if size % 3600 == 0 and origin % 3600 == 0:
        sql = f"""
            SELECT CAST((hour * 3600 - :origin) / :size AS INTEGER) AS i, SUM(requests),
              SUM(cache_read_tokens), SUM(total_input_tokens), SUM(cost_usd),
              SUM(cost_without_cache_usd)
            FROM {HOURLY} GROUP BY i ORDER BY i
        """
    else:
        sql = f"""
            SELECT CAST((started_at - :origin) / :size AS INTEGER) AS i, COUNT(*),
              CAST(TOTAL(cache_read_tokens) AS INTEGER), CAST(TOTAL(total_input_tokens) AS INTEGER),
              TOTAL(CAST(cost_usd AS REAL)), TOTAL(CAST(cost_without_cache_usd AS REAL))
            FROM requests WHERE {_ROWS} GROUP BY i ORDER BY i
        """
    rows = conn.execute(sql, w.params(origin=origin, size=size))
    return [(int(i), TimelineRow(origin + int(i) * size, *rest)) for i, *rest in rows]


@dataclass(frozen=True)
class WasteRow:
    """Per model: cache-write tokens by TTL bucket never read back, and the requests that wrote
    them (rows whose writes were read back in part count as read)."""

    model: str | None
    wasted_5m_tokens: int
    wasted_1h_tokens: int
    wasted_unknown_tokens: int
    wasted_requests: int


def wasted_writes(conn: sqlite3.Connection, w: Window, *, now: float) -> list[WasteRow]:
    """Write tokens never read back within their TTL, per model (see the module docstring).

    ``now`` (unix s) decides which writes are still pending: those younger than their TTL whose
    family has no later request yet (the latest of its family among the requests of the last
    hour before ``now``, which hold every later one: one range read of the start-time index).
    """
    written = conn.execute(
        f"""
        SELECT model, SUM(cache_write_5m_tokens) - SUM(read_back_5m_tokens),
          SUM(cache_write_1h_tokens) - SUM(read_back_1h_tokens),
          SUM(cache_write_unknown_tokens) - SUM(read_back_unknown_tokens),
          SUM(write_requests) - SUM(read_back_requests)
        FROM {HOURLY} WHERE vendor != 'engine' GROUP BY model
        """,
        w.params(),
    ).fetchall()
    pending = {
        row[0]: row[1:]
        for row in conn.execute(
            f"""
            SELECT COALESCE(x.model, ''),
              TOTAL(CASE WHEN x.started_at + 300 > :now THEN x.cache_write_5m_tokens END),
              TOTAL(CASE WHEN x.started_at + 3600 > :now THEN x.cache_write_1h_tokens END),
              TOTAL(CASE WHEN x.started_at + 300 > :now THEN x.cache_write_unknown_tokens END),
              -- the requests with a write still pending (not every latest one of the hour: an
              -- expired one is wasted)
              SUM(CASE WHEN (x.started_at + 300 > :now
                             AND COALESCE(x.cache_write_5m_tokens, 0)
                                 + COALESCE(x.cache_write_unknown_tokens, 0) > 0)
                        OR (x.started_at + 3600 > :now
                            AND COALESCE(x.cache_write_1h_tokens, 0) > 0)
                       THEN 1 ELSE 0 END)
            FROM (SELECT model, vendor, started_at, cache_write_5m_tokens,
                    cache_write_1h_tokens, cache_write_unknown_tokens,
                    MAX(started_at) OVER (PARTITION BY key_fingerprint, model,
                                          {FAMILY_KEY.format(r="requests")}) AS latest
                  FROM requests WHERE started_at > :now - 3600
                    -- a later request that failed (a 529, a client gone) read nothing back: the
                    -- break explainer never makes it a successor, so the write still waits
                    AND status >= 200 AND status < 300) AS x
            WHERE x.started_at >= :t0 AND x.started_at < :t1
              AND x.started_at = x.latest
              AND COALESCE(x.vendor, '') != 'engine'
              AND COALESCE(x.cache_write_5m_tokens, 0) + COALESCE(x.cache_write_1h_tokens, 0)
                  + COALESCE(x.cache_write_unknown_tokens, 0) > 0
            GROUP BY 1
            """,
            w.params(now=now),
        )
    }
    out = []
    for model, w5, w1, wu, n in written:
        p5, p1, pu, pn = pending.get(model, (0, 0, 0, 0))
        row = WasteRow(
            model=model or None,
            wasted_5m_tokens=max(0, int(w5 - p5)),
            wasted_1h_tokens=max(0, int(w1 - p1)),
            wasted_unknown_tokens=max(0, int(wu - pu)),
            wasted_requests=max(0, int(n - pn)),
        )
        if row.wasted_5m_tokens or row.wasted_1h_tokens or row.wasted_unknown_tokens:
            out.append(row)
    return out


@dataclass(frozen=True)
class BreakGroupRow:
    """Cache breaks of one (reason, model, segment) and the input tokens they lost.

    ``tokens_lost_write_5m`` / ``tokens_lost_write_1h``: how many of ``tokens_lost`` the requests
    paid as 5-minute (or TTL-unknown) / 1-hour cache writes; the rest were plain input.
    """

    reason: str
    model: str | None
    segment: str | None
    breaks: int
    tokens_lost: int
    tokens_lost_write_5m: int = 0
    tokens_lost_write_1h: int = 0


def break_groups(conn: sqlite3.Connection, w: Window) -> list[BreakGroupRow]:
    """Breaks per (reason, model, segment) in the window."""
    sql = f"""
        SELECT reason, model, segment, SUM(breaks), SUM(tokens_lost),
               SUM(tokens_lost_write_5m), SUM(tokens_lost_write_1h)
        FROM {BREAKS} GROUP BY reason, model, segment HAVING SUM(breaks) > 0
    """
    return [
        BreakGroupRow(reason, model or None, segment or None, breaks, lost, lost_5m, lost_1h)
        for reason, model, segment, breaks, lost, lost_5m, lost_1h in conn.execute(sql, w.params())
    ]


@dataclass(frozen=True)
class PricedAsRow:
    """Requests for ``model`` (no price row of its own) priced at ``priced_as``'s rates."""

    model: str | None
    priced_as: str
    requests: int


def priced_as(conn: sqlite3.Connection, w: Window) -> list[PricedAsRow]:
    """Which unpriced models the proxy priced at another model's rates (upstream ``price_as``),
    most requests first; read through the partial index ``idx_requests_priced_as``."""
    sql = f"""
        SELECT model, priced_as, COUNT(*) FROM requests INDEXED BY idx_requests_priced_as
        WHERE priced_as IS NOT NULL AND {_ROWS}
        GROUP BY model, priced_as ORDER BY COUNT(*) DESC, model
    """
    return [PricedAsRow(m, p, n) for m, p, n in conn.execute(sql, w.params())]


def break_examples(conn: sqlite3.Connection, w: Window, reason: str, limit: int) -> list[str]:
    """The ids of the latest ``limit`` requests that broke for ``reason`` in the window."""
    sql = f"""
        SELECT id FROM requests INDEXED BY idx_requests_break_reason
        WHERE break_reason = :reason AND {_ROWS} ORDER BY started_at DESC LIMIT :limit
    """
    return [row[0] for row in conn.execute(sql, w.params(reason=reason, limit=limit))]


@dataclass(frozen=True)
class TtftRow:
    """Nearest-rank TTFT percentiles (ms) of successful requests that did / did not hit."""

    hit: bool
    requests: int
    p50_ms: float
    p95_ms: float


def _rank(n: int, percent: int) -> int:
    """Nearest-rank position (1-based) of the ``percent``-th percentile among ``n`` values."""
    return max(1, -(-n * percent // 100))


def _bucket_of(buckets: list[tuple[int, int]], rank: int) -> tuple[int, int]:
    """The bucket (of ``(bucket, count)`` pairs, ascending) that holds the ``rank``-th value
    (1-based), and how many values the buckets below it hold."""
    below = 0
    for bucket, count in buckets:
        if below + count >= rank:
            return bucket, below
        below += count
    raise ValueError(f"rank {rank} is past the {below} values counted")


def ttft_percentiles(conn: sqlite3.Connection, w: Window) -> list[TtftRow]:
    """TTFT p50 / p95 for cache hits (cache_read_tokens > 0) and misses (== 0), status 2xx-3xx.

    The TTFT histogram rollup (:mod:`..ttft_rollup`, and the edge requests) gives each class's
    count per bucket; each percentile's rank falls in one bucket, and the walk of
    ``idx_requests_ttft`` (index alone) reads only that bucket's requests, in TTFT order, up to
    the rank less the requests of the lower buckets. Buckets never decrease with TTFT, so this
    is the nearest-rank percentile over the whole class.
    """
    counts: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    sql = f"""
        SELECT hit, bucket, TOTAL(requests) FROM {TTFT}
        GROUP BY hit, bucket ORDER BY hit, bucket
    """
    for hit, bucket, n in conn.execute(sql, w.params()):
        if n:
            counts[bool(hit)].append((int(bucket), int(n)))
    walk = f"""
        SELECT ttft_ms FROM requests INDEXED BY idx_requests_ttft
        WHERE (cache_read_tokens > 0) = :hit AND ttft_ms IS NOT NULL
          AND cache_read_tokens IS NOT NULL AND status >= 200 AND status < 400
          AND ttft_ms >= :low AND ttft_ms < :high
          AND CAST(ttft_ms / {BUCKET_MS} AS INTEGER) = :bucket AND {_ROWS}
        ORDER BY ttft_ms LIMIT 1 OFFSET :skip
    """
    out = []
    for hit in (True, False):
        buckets = counts[hit]
        n = sum(count for _, count in buckets)
        if not n:
            continue
        values: list[float] = []
        for percent in (50, 95):
            rank = _rank(n, percent)
            bucket, below = _bucket_of(buckets, rank)
            # the bucket's TTFT range (bucket 0 and below: the cast truncates toward zero),
            # widened by 1 ms against rounding; the bucket test in the query decides
            params = w.params(
                hit=hit,
                bucket=bucket,
                low=(bucket if bucket > 0 else bucket - 1) * BUCKET_MS - 1,
                high=(bucket + 1) * BUCKET_MS + 1,
                skip=rank - below - 1,
            )
            row = conn.execute(walk, params).fetchone()
            if row is not None:
                values.append(float(row[0]))
        if len(values) == 2:  # a row deleted since the rollup count leaves a gap: skip
            out.append(TtftRow(hit, n, values[0], values[1]))
    return out


@dataclass(frozen=True)
class FamilyRow:
    """One prefix family's traffic in the window (the TTL advisor's input).

    Attributes:
        key_fingerprint, model, first_segment_hash: the family (None for a NULL key/model);
            ``first_segment_hash`` is the prefix family's id (``requests.prefix_family``: the
            first segment hash of the family's first request).
        vendor: its upstream vendor.
        requests: requests with usage.
        prefix_tokens: the typical cached prefix: mean cache read + write tokens of requests
            that used the cache, else the smallest approximate prefix.
        cache_write_5m_tokens, cache_write_1h_tokens: writes by TTL (unknown-TTL writes count
            as 5m): which TTL the family uses now.
        input_tokens: total input tokens (the ranking key).
    """

    key_fingerprint: str | None
    model: str | None
    first_segment_hash: str
    vendor: str | None
    requests: int
    prefix_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    input_tokens: int


def busiest_families(conn: sqlite3.Connection, w: Window, limit: int) -> list[FamilyRow]:
    """The ``limit`` prefix families with the most input tokens in the window."""
    sql = f"""
        SELECT key_fingerprint, model, prefix_family, MAX(vendor), SUM(requests),
          CAST(COALESCE(CAST(SUM(cached_prefix_tokens) AS REAL) / NULLIF(SUM(cached_requests), 0),
                        MIN(min_prefix_tokens), 0) AS INTEGER),
          SUM(cache_write_5m_tokens), SUM(cache_write_1h_tokens), SUM(input_tokens) AS input
        FROM {FAMILIES}
        GROUP BY key_fingerprint, model, prefix_family
        ORDER BY input DESC, prefix_family LIMIT :limit
    """
    return [
        FamilyRow(key or None, model or None, first, vendor or None, *rest)
        for key, model, first, vendor, *rest in conn.execute(sql, w.params(limit=limit))
    ]


def _stored_family(family: FamilyRow) -> dict[str, object]:
    """``kf``, ``model``, ``first``: ``family``'s key as the rollups store it (NULL as ``''``)."""
    return {
        "kf": family.key_fingerprint or "",
        "model": family.model or "",
        "first": family.first_segment_hash,
    }


#: ``requests`` rows of the family named by ``:kf``, ``:model``, ``:first`` (as stored).
_FAMILY_ROWS: Final = family_match("requests", ":kf", ":model", ":first")


def family_start_times(conn: sqlite3.Connection, family: FamilyRow, w: Window) -> list[float]:
    """Start times (unix s, ascending) of one family's requests in the window, read from the
    family gap index (so failed requests are included: they are few and cost the same under
    every TTL option). A family's key fingerprint or model that is NULL or ``''`` is one
    family, as in the family rollup that names the families."""
    sql = f"""
        SELECT started_at FROM requests INDEXED BY {GAPS_INDEX}
        WHERE {_FAMILY_ROWS} AND {_ROWS}
        ORDER BY started_at
    """
    return [row[0] for row in conn.execute(sql, w.params(**_stored_family(family)))]


def family_write_counts(
    conn: sqlite3.Connection, family: FamilyRow, w: Window
) -> TTLWriteCounts | None:
    """The TTL simulation's counts (:class:`promptcache.ttl.TTLWriteCounts`) of one family's
    requests in the window, computed by the database. 5-minute writes (a request
    ``LIFETIME_S["5m"]`` s or more after its predecessor, and the first one) from the gap
    rollup (:mod:`..gap_rollup`): the hours' inner gaps plus one check per pair of consecutive
    non-empty hours, the partial edge hours counted over their rows; 1-hour writes by a
    recursive walk of one index seek per write (the first request at or after the last
    write + ``LIFETIME_S["1h"]`` s). The same requests as :func:`family_start_times` (failed
    ones included), the same float arithmetic as :func:`promptcache.ttl.write_counts`. None
    when the family has no request in the window."""
    gaps = f"""
        SELECT TOTAL(n), TOTAL(gaps + CASE WHEN previous IS NULL OR first >= previous + :five
                                          THEN 1 ELSE 0 END),
               MIN(first), MAX(last)
        FROM (SELECT n, gaps, first, last, LAG(last) OVER (ORDER BY first) AS previous
              FROM ({SEGMENTS}) AS segment WHERE n > 0) AS ordered
    """
    walk = f"""
        WITH RECURSIVE writes(at) AS (
            SELECT MIN(started_at) FROM requests INDEXED BY {GAPS_INDEX}
            WHERE {_FAMILY_ROWS} AND {_ROWS}
          UNION ALL
            SELECT (SELECT MIN(started_at) FROM requests INDEXED BY {GAPS_INDEX}
                    WHERE {_FAMILY_ROWS} AND started_at >= writes.at + :hour
                      AND started_at < :t1)
            FROM writes WHERE writes.at IS NOT NULL
        )
        SELECT COUNT(at) FROM writes
    """
    params = w.params(**_stored_family(family), five=LIFETIME_S["5m"], hour=LIFETIME_S["1h"])
    n, writes_5m, first, last = conn.execute(gaps, params).fetchone()
    if not n:
        return None
    (writes_1h,) = conn.execute(walk, params).fetchone()
    return TTLWriteCounts(int(n), int(writes_5m), int(writes_1h), float(last) - float(first))
