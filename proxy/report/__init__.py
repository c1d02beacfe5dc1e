"""``promptcache report``: what caching saved, where and why the cache broke, and what to do next.

:func:`build_report` opens the proxy's SQLite log read-only, runs the aggregates in
:mod:`.report.queries` (all in SQL) and assembles a :class:`Report`; the renderers in
:mod:`.report.render` and :mod:`.report.html` turn it into a table, JSON, CSV or one HTML file.

Money (USD; floats in the dataclasses, rounded for display; ``--format json`` writes every
``*_usd`` field as a decimal string rounded to micro-dollars, see :meth:`Report.to_dict`):

- ``cost_usd`` / ``cost_without_cache_usd`` are the per-request figures the proxy stored (the SDK's
  :func:`promptcache.pricing.cost`), summed; requests of unpriced models are counted apart.
  Models without a price row that an upstream's ``price_as`` priced at another model's rates
  are in the cost and listed in ``Report.priced_as`` (table footnote, JSON field, HTML note).
- ``net_savings_usd`` = cost without cache - cost: cache-write premiums are already inside
  ``cost_usd``, so this goes negative when writes are never read back.
- Dollars lost to a break = what the lost tokens cost minus what reading them from cache would
  have: tokens lost x (input rate - cache-read rate), plus, for the lost tokens the request paid
  as cache writes, (write rate - input rate) per 5m and 1h write token (:mod:`.rollup`).
- Wasted-write dollars = the write premium over plain input (write rate - input rate) of writes
  nobody read within their TTL.

Recommendations follow the standard escalation: a low hit rate points at prefix stability first
(naming the top breaking segment); only then TTL (a high hit rate with gaps just past the TTL points
at a longer TTL, from :mod:`promptcache.ttl`), wasted writes, unexpected misses; for the engine
upstream, KV-pool pressure points at prefix-caching settings, then swap space, then KV quantisation.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from promptcache.errors import ConfigError, StoreError, UnknownModelPriceError
from promptcache.pricing import ModelPrice, lookup_price

from ..dialect import is_postgres_url
from ..rollup import ROLLUP_TABLES
from ..store import SCHEMA_VERSION, open_log
from . import queries as q
from .advice import (
    EngineKvStats,
    Recommendation,
    TtlAdvice,
    advise_families,
    recommend,
)
from .agreement import Agreement, agreement
from .merge import merged_log
from .replicas import ReplicaSummary, replica_summaries
from .types import (
    BreakReasonSummary,
    PricedAs,
    Summary,
    TimelinePoint,
    TtftSummary,
    WastedWrites,
)
from .window import Window

__all__ = [
    "GROUP_BY_CHOICES",
    "HIT_DEFINITION",
    "Agreement",
    "BreakReasonSummary",
    "PricedAs",
    "Report",
    "Summary",
    "TimelinePoint",
    "TtftSummary",
    "WastedWrites",
    "build_report",
    "connect_log",
    "pick_bucket_s",
    "usd_text",
]

#: Values accepted by ``--group-by``.
GROUP_BY_CHOICES: tuple[str, ...] = tuple(q.GROUP_BY_SQL)

#: What a *cache hit* is, everywhere (report table, HTML, JSON, CSV ``hit_requests``, the TTFT
#: split, the rollups' ``hit_requests``/``ttft_hit_requests``, and ``promptcache demo``).
HIT_DEFINITION = "a request that read at least 1 input token from the cache (cache_read_tokens > 0)"
#: The explainer's code for the first request of a prefix family: logged in ``break_reason``
#: but not a break (nothing earlier could be reused); reported as ``Summary.new_prefixes``.
NOT_A_BREAK = "new_prefix"
#: Example request ids listed per break reason.
EXAMPLES_PER_REASON = 3
#: Bucket sizes (s) the timeline chooses from: the smallest that keeps fewer than
#: :data:`MAX_BUCKETS` buckets over the traffic's span (so under 6 h they are minutes or less).
BUCKET_LADDER_S: tuple[float, ...] = (
    0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200, 86400, 7 * 86400,
)  # fmt: skip
MAX_BUCKETS = 30
#: Prefix families the TTL advisor looks at (the busiest by input tokens).
TTL_FAMILIES = 10
#: Seconds opening a log waits for another connection's lock (sqlite3's default busy timeout).
LOCK_WAIT_S = 5.0
_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Report:
    """Everything ``promptcache report`` shows, for one time window ``[since, until)`` (unix s)."""

    db: str
    since: float
    until: float
    group_by: str | None
    generated_at: float
    total: Summary
    groups: tuple[Summary, ...]
    #: the timeline's bucket size (s): :func:`pick_bucket_s` over the traffic's span, so a
    #: window under 6 h has buckets of minutes or less
    bucket_s: float
    timeline: tuple[TimelinePoint, ...]
    break_reasons: tuple[BreakReasonSummary, ...]
    wasted_writes: WastedWrites
    ttft: tuple[TtftSummary, ...]
    ttl_advice: tuple[TtlAdvice, ...]
    recommendations: tuple[Recommendation, ...]
    engine: EngineKvStats | None = None
    priced_as: tuple[PricedAs, ...] = ()
    #: requests by replica, then each fleet's total (:mod:`.report.replicas`); empty when no
    #: upstream lists replicas
    replicas: tuple[ReplicaSummary, ...] = ()
    #: the logs reported when several were given (``db`` then names them joined by `` + ``);
    #: empty for one log (``db`` is its path)
    sources: tuple[str, ...] = ()
    #: our break reasons against the vendors' own diagnoses (:mod:`.report.agreement`); None
    #: when no request of the window carries one
    agreement: Agreement | None = None
    #: breaks of the engine upstream whose reason counts tokens lost (``queries.engine_breaks``):
    #: their ``tokens_lost`` counts whole tokens, the engine reuses whole KV blocks
    #: (``render.engine_lost_note``)
    engine_breaks: int = 0
    #: breaks of the OpenAI and OpenAI-compatible upstreams whose tokens lost counts the
    #: predecessor's whole input, by vendor (``queries.automatic_breaks``): those caches hold
    #: whole blocks (``render.block_lost_notes``)
    automatic_breaks: dict[str, int] = field(default_factory=dict)

    @property
    def db_shown(self) -> str:
        """``db`` as reports show it: a ``postgresql://`` URL's user and password masked."""
        from ..redact import redact_url

        return redact_url(self.db)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (what ``--format json`` prints).

        Money (every ``*_usd`` and ``usd_*`` field) is a decimal string rounded to
        :data:`JSON_USD_PLACES` places (``"0.3"``, never ``0.30000000000000004``), as
        ``promptcache cost`` writes money.
        """
        data = asdict(self)
        data["db"] = self.db_shown
        data["hit_definition"] = HIT_DEFINITION
        data["total"]["cache_write_tokens"] = self.total.cache_write_tokens
        for item, summary in zip(data["groups"], self.groups, strict=True):
            item["cache_write_tokens"] = summary.cache_write_tokens
        money: dict[str, Any] = _money_as_text(data)
        return money


#: Decimal places of the USD strings in :meth:`Report.to_dict` and the CSV (micro-dollars).
JSON_USD_PLACES = 6
_USD_QUANTUM = Decimal(1).scaleb(-JSON_USD_PLACES)


def usd_text(value: float) -> str:
    """``value`` (USD) as a plain decimal string rounded to :data:`JSON_USD_PLACES` places.

    The hourly rollups sum per-request costs as SQLite REALs, so a sum carries float noise in
    its last bits (0.1 + 0.2 = 0.30000000000000004); rounding to micro-dollars drops it.
    """
    text = format(Decimal(repr(value)).quantize(_USD_QUANTUM).normalize(), "f")
    return "0" if text in ("-0", "0") else text


def _money_as_text(node: Any) -> Any:
    """A copy of ``node``: each number under a ``*_usd`` or ``usd_*`` key as :func:`usd_text`
    (an int too: SQL's ``COALESCE(SUM(cost_usd), 0)`` over no rows is the integer 0)."""
    if isinstance(node, dict):
        return {
            k: usd_text(v)
            if (k.endswith("_usd") or k.startswith("usd_"))
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            else _money_as_text(v)
            for k, v in node.items()
        }
    if isinstance(node, (list, tuple)):
        return [_money_as_text(v) for v in node]
    return node


def connect_log(db_path: str | Path) -> sqlite3.Connection:
    """Open the proxy's log read-only (a log of an older schema is first migrated in place,
    as the proxy itself would on start, which also fills the report rollups).

    ``db_path`` may be a ``postgresql://`` URL: the result is then a
    :class:`~promptcache.proxy.store_postgres.PgConnection` in one read-only snapshot, which
    runs the same queries (typed as ``sqlite3.Connection``: it has the methods they call).

    Raises:
        ConfigError: the file does not exist or is not a promptcache proxy log.
        StoreError: an older log could not be migrated, or the log is newer than this
            promptcache, or another connection holds it locked; the Postgres server cannot be
            reached.
    """
    if is_postgres_url(db_path):
        return _connect_postgres(str(db_path))
    path = Path(db_path)
    if path.is_dir():
        raise ConfigError(
            f"{path} is a folder, not a proxy log: pass the file the proxy's --db names "
            "(promptcache.db by default)"
        )
    if not path.is_file():
        raise ConfigError(
            f"no proxy log at {path}: start `promptcache proxy --db {path}` first, or pass "
            "--db with the path of an existing log"
        )
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        try:
            conn, tables = _open_read_only(uri)
        except sqlite3.OperationalError:
            if os.access(path.parent, os.W_OK):
                raise
            # A WAL-mode log in a folder we cannot write (a read-only mount, another user's
            # directory): SQLite cannot create the -shm file a read-only open needs. Read the
            # file as it is on disk (https://www.sqlite.org/uri.html#uriimmutable, checked
            # 2026-11-30); a proxy still writing there would not be seen.
            uri += "&immutable=1"
            conn, tables = _open_read_only(uri)
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise ConfigError(f"cannot read the request log {path}: {exc}") from exc
        # a SQLite file another connection holds locked (the proxy's WAL log never locks its
        # readers out: a `sqlite3` shell in BEGIN EXCLUSIVE, or a copy in rollback-journal mode
        # being written)
        raise StoreError(
            f"the request log {path} is locked by another connection ({exc}) after waiting "
            f"{LOCK_WAIT_S:g} s: end the transaction that holds it, then report again"
        ) from exc
    except sqlite3.DatabaseError as exc:
        raise ConfigError(
            f"{path} is not a SQLite database ({exc}); pass the proxy's --db file "
            "(promptcache.db by default)"
        ) from exc
    if "requests" not in tables or "schema_version" not in tables:
        conn.close()
        raise ConfigError(f"{path} has no promptcache `requests` table; pass the proxy's --db")
    version = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"the request log {path} has schema version {version}, newer than this promptcache "
            f"({SCHEMA_VERSION}); upgrade promptcache to report on it"
        )
    if version < SCHEMA_VERSION or not set(ROLLUP_TABLES) <= tables:
        conn.close()
        if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            raise ConfigError(
                f"{path} is a log of an older promptcache (schema {version}); it is upgraded in "
                "place on first use, which needs write access to it and its folder: copy it "
                "somewhere writable and pass that copy as --db"
            )
        open_log(path).close()  # migrate: adds, rebuilds and backfills the rollups
        conn = sqlite3.connect(uri, uri=True)
    return conn


def _connect_postgres(url: str) -> sqlite3.Connection:
    from ..store_postgres import PgConnection, redact_url, require_log

    conn = PgConnection(url)
    try:
        version = require_log(conn)
        conn.rollback()
    except BaseException:
        conn.close()
        raise
    if version == 0:
        conn.close()
        raise ConfigError(
            f"{redact_url(url)} holds no promptcache log; start `promptcache proxy --db "
            f"{redact_url(url)}` "
            "first, or pass the --db a proxy writes to"
        )
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"the request log {redact_url(url)} has schema version {version}, newer than this "
            f"promptcache ({SCHEMA_VERSION}); upgrade promptcache to report on it"
        )
    conn.close()
    if version < SCHEMA_VERSION:
        open_log(url).close()  # migrate, as the proxy itself would on start
    reader: Any = PgConnection(url, read_only=True)
    return reader  # type: ignore[no-any-return]


def _open_read_only(uri: str) -> tuple[sqlite3.Connection, set[str]]:
    """A connection to ``uri`` and the names in its ``sqlite_master`` (closed if reading fails)."""
    conn = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_S)
    try:
        return conn, {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except BaseException:
        conn.close()
        raise


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _summary(row: q.GroupRow, new_prefixes: int = 0) -> Summary:
    """One group's figures; ``new_prefixes`` of its ``row.breaks`` were the first request of a
    prefix family (``new_prefix``), which is counted apart: there was nothing to reuse."""
    token_rate = _ratio(row.cache_read_tokens, row.total_input_tokens)
    request_rate = _ratio(row.hit_ratio_sum, row.requests_with_input)
    return Summary(
        group=row.group,
        requests=row.requests,
        requests_with_usage=row.requests_with_usage,
        hit_requests=row.hit_requests,
        token_hit_rate=token_rate,
        request_hit_rate=request_rate,
        uncached_input_tokens=row.uncached_input_tokens,
        cache_read_tokens=row.cache_read_tokens,
        cache_write_5m_tokens=row.cache_write_5m_tokens,
        cache_write_1h_tokens=row.cache_write_1h_tokens,
        cache_write_unknown_tokens=row.cache_write_unknown_tokens,
        output_tokens=row.output_tokens,
        total_input_tokens=row.total_input_tokens,
        cost_usd=row.cost_usd,
        cost_without_cache_usd=row.cost_without_cache_usd,
        net_savings_usd=row.cost_without_cache_usd - row.cost_usd,
        unpriced_requests=row.unpriced_requests,
        errors=row.errors,
        breaks=row.breaks - new_prefixes,
        unexpected_misses=row.unexpected_misses,
        new_prefixes=new_prefixes,
    )


def _add(rows: list[q.GroupRow]) -> q.GroupRow:
    """Sum additive group rows into one total row."""
    names = [f for f in q.GroupRow.__dataclass_fields__ if f != "group"]
    return q.GroupRow(None, *(sum(getattr(r, name) for r in rows) for name in names))


class _Prices:
    """Price rows per model, looked up once; a model without a row gets the row of the model
    the proxy priced it as (``priced_as``: model -> price-table model), else None."""

    def __init__(self, priced_as: Mapping[str | None, str] | None = None) -> None:
        self._rows: dict[str | None, ModelPrice | None] = {}
        self._priced_as = dict(priced_as or {})

    def get(self, model: str | None) -> ModelPrice | None:
        if model not in self._rows:
            try:
                self._rows[model] = lookup_price(model) if model else None
            except UnknownModelPriceError:
                stand_in = self._priced_as.get(model)
                self._rows[model] = lookup_price(stand_in) if stand_in else None
        return self._rows[model]


def pick_bucket_s(span_s: float) -> float:
    """The smallest :data:`BUCKET_LADDER_S` size giving fewer than :data:`MAX_BUCKETS` buckets
    over ``span_s`` seconds (the largest size beyond that)."""
    for size in BUCKET_LADDER_S:
        if span_s / size < MAX_BUCKETS:
            return size
    return BUCKET_LADDER_S[-1]


def _timeline(conn: sqlite3.Connection, w: Window) -> tuple[float, tuple[TimelinePoint, ...]]:
    """The chart buckets: their size (:func:`pick_bucket_s` over the span from the window's
    first to its last request; over the whole window when it has none) and the non-empty
    ones, aligned to multiples of their size."""
    span = q.traffic_span(conn, w)
    if span is None:
        return pick_bucket_s(w.until - w.since), ()
    size = pick_bucket_s(span[1] - span[0])
    origin = math.floor(span[0] / size) * size
    points = tuple(
        TimelinePoint(
            start=t.bucket_start,
            requests=t.requests,
            hit_rate=_ratio(t.cache_read_tokens, t.total_input_tokens),
            cost_usd=t.cost_usd,
            cost_without_cache_usd=t.cost_without_cache_usd,
        )
        for _, t in q.timeline(conn, w, origin, size)
    )
    return size, points


def _break_reasons(
    conn: sqlite3.Connection, w: Window, prices: _Prices
) -> tuple[BreakReasonSummary, ...]:
    per_reason: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "breaks": 0,
            "tokens": 0,
            "usd": Decimal(0),
            "unpriced": 0,
            "segments": defaultdict(int),
        }
    )
    for row in q.break_groups(conn, w):
        if row.reason == NOT_A_BREAK:
            continue  # counted as Summary.new_prefixes
        item = per_reason[row.reason]
        item["breaks"] += row.breaks
        item["tokens"] += row.tokens_lost
        price = prices.get(row.model)
        if price is None:
            item["unpriced"] += row.breaks
        else:
            item["usd"] += (
                row.tokens_lost * (price.input - price.cache_read)
                + row.tokens_lost_write_5m * (price.cache_write_5m - price.input)
                + row.tokens_lost_write_1h * (price.cache_write_1h - price.input)
            ) / _MILLION
        if row.segment is not None:
            item["segments"][row.segment] += row.breaks
    out = []
    for reason, item in per_reason.items():
        segments: dict[str, int] = item["segments"]
        top = max(segments.items(), key=lambda kv: (kv[1], kv[0]), default=(None, 0))
        out.append(
            BreakReasonSummary(
                reason=reason,
                breaks=item["breaks"],
                tokens_lost=item["tokens"],
                usd_lost=float(item["usd"]),
                top_segment=top[0],
                top_segment_breaks=top[1],
                example_ids=tuple(q.break_examples(conn, w, reason, EXAMPLES_PER_REASON)),
                unpriced_breaks=item["unpriced"],
            )
        )
    out.sort(key=lambda b: (-b.usd_lost, -b.tokens_lost, -b.breaks, b.reason))
    return tuple(out)


def _wasted(conn: sqlite3.Connection, w: Window, now: float, prices: _Prices) -> WastedWrites:
    tokens = requests = unpriced = 0
    premium = Decimal(0)
    for row in q.wasted_writes(conn, w, now=now):
        tokens += row.wasted_5m_tokens + row.wasted_1h_tokens + row.wasted_unknown_tokens
        requests += row.wasted_requests
        price = prices.get(row.model)
        if price is None:
            unpriced += row.wasted_requests
        else:
            premium += (
                row.wasted_5m_tokens * (price.cache_write_5m - price.input)
                + row.wasted_1h_tokens * (price.cache_write_1h - price.input)
                + row.wasted_unknown_tokens * (price.cache_write_5m - price.input)
            ) / _MILLION
    return WastedWrites(
        tokens=tokens, requests=requests, premium_usd=float(premium), unpriced_requests=unpriced
    )


def build_report(
    db_path: str | Path | Sequence[str | Path],
    *,
    since: float,
    until: float,
    group_by: str | None = None,
    now: float | None = None,
    engine: EngineKvStats | None = None,
) -> Report:
    """Aggregate the proxy log over ``[since, until)`` (unix seconds) into a :class:`Report`.

    Every figure covers exactly ``[since, until)``: the whole UTC hours inside it come from the
    hourly rollups (:mod:`.rollup`, milliseconds whatever the log's size), the partial hours at
    its edges from their own requests (:mod:`.report.window`). The report's ``since``/``until``
    are the given bounds.

    Args:
        db_path: the proxy's SQLite file (opened read-only; never changed), or several, reported
            as one log (:mod:`.report.merge`).
        since, until: the window; requests are selected by ``started_at``.
        group_by: one of :data:`GROUP_BY_CHOICES`, or None for totals only.
        now: the current time (default: the wall clock); decides which cache writes are
            still within their TTL, and is stamped on the report.
        engine: the engine upstream's KV-pool state, for the engine recommendations.

    Raises:
        ConfigError: bad window or ``group_by``, or ``db_path`` is not a proxy log.
    """
    paths = [db_path] if isinstance(db_path, (str, Path)) else list(db_path)
    if len(paths) != 1:
        if not paths:
            raise ConfigError("give at least one --db log")
        if any(is_postgres_url(p) for p in paths):
            raise ConfigError(
                "a postgresql:// log is already the shared log of its proxies: report it alone "
                "(several --db merge SQLite files only)"
            )
        with merged_log(paths) as merged:
            report = build_report(
                merged, since=since, until=until, group_by=group_by, now=now, engine=engine
            )
        names = tuple(str(p) for p in paths)
        return dataclasses.replace(report, db=" + ".join(names), sources=names)
    db_path = paths[0]
    if group_by is not None and group_by not in q.GROUP_BY_SQL:
        raise ConfigError(
            f"unknown --group-by {group_by!r}; use one of: {', '.join(GROUP_BY_CHOICES)}"
        )
    if until <= since:
        raise ConfigError("--until must be later than --since")
    now = time.time() if now is None else now
    w = Window(float(since), float(until))
    conn = connect_log(db_path)
    try:
        priced_as = tuple(PricedAs(r.model, r.priced_as, r.requests) for r in q.priced_as(conn, w))
        # most requests first: a model priced as several models takes the commonest one
        prices = _Prices({p.model: p.priced_as for p in reversed(priced_as)})
        rows = q.group_totals(conn, w, group_by)
        firsts = q.new_prefixes(conn, w, group_by)
        total = _summary(_add(rows), sum(firsts.values()))
        groups = tuple(_summary(r, firsts.get(r.group, 0)) for r in rows) if group_by else ()
        bucket_s, points = _timeline(conn, w)
        reasons = _break_reasons(conn, w, prices)
        wasted = _wasted(conn, w, now, prices)
        ttft = tuple(
            TtftSummary(r.hit, r.requests, r.p50_ms, r.p95_ms) for r in q.ttft_percentiles(conn, w)
        )
        advice = tuple(advise_families(conn, w, prices.get, limit=TTL_FAMILIES))
        replicas = tuple(replica_summaries(conn, w))
        agreed = agreement(conn, w)
        engine_breaks = q.engine_breaks(conn, w)
        automatic = q.automatic_breaks(conn, w)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the request log {db_path}: {exc}") from exc
    finally:
        conn.close()
    return Report(
        db=str(db_path),
        since=w.since,
        until=w.until,
        group_by=group_by,
        generated_at=now,
        total=total,
        groups=groups,
        bucket_s=bucket_s,
        timeline=points,
        break_reasons=reasons,
        wasted_writes=wasted,
        ttft=ttft,
        ttl_advice=advice,
        recommendations=tuple(recommend(total, reasons, wasted, advice, engine)),
        engine=engine,
        priced_as=priced_as,
        replicas=replicas,
        agreement=agreed,
        engine_breaks=engine_breaks,
        automatic_breaks=automatic,
    )
