"""Hourly rollups of the request log, kept by SQLite triggers, so reports stay fast at any size.

``promptcache report`` must answer in seconds on logs of millions of rows. Summing a million wide
rows (each carries JSON usage and segment hashes) takes SQLite several seconds, and every
``GROUP BY`` sorts them. So the log keeps, next to ``requests``, small additive tables updated
inside the insert's own transaction by ``AFTER INSERT`` triggers (nothing to run, nothing to
forget, and a ``sqlite3`` shell inserting rows keeps them right too; the proxy's own writer
turns them off for its connection and adds each batch with one statement a rollup, to the same
values: :mod:`.writer_rollups`):

``report_hourly``         per (UTC hour, model, route, key_fingerprint, vendor): request counts,
                          the usage buckets, cost and cost without cache, breaks, unexpected
                          misses, TTFT counts, cache-write tokens and the write tokens *read back*
                          (the family's next request read the cache within the write's TTL).
``report_breaks_hourly``  per (hour, reason, model, segment): breaks, tokens lost, and how many
                          of those the request paid as 5m (or TTL-unknown) and as 1h writes.
``report_family_hourly``  per (hour, key_fingerprint, model, prefix_family): the TTL
                          advisor's and the families table's ranking inputs (a prefix family:
                          requests the break explainer found to share a prefix, see
                          ``breaks.py``; keyed by the first segment's hash before schema
                          step 9).

NULL text keys are stored as ``''`` (SQLite treats NULLs as distinct in a UNIQUE key). Deleting
rows from ``requests`` subtracts them from ``report_hourly``/``report_breaks_hourly`` (trigger),
but read-back credit given to other rows is not taken back.

Definitions (shared with ``breaks.py`` and ``report/``):

- a write's TTL is 1 h for ``cache_write_1h_tokens``, 5 min for 5m and unknown-TTL writes; the
  engine upstream has no TTL;
- a write is *read back* when the next request of its family (the one whose
  ``previous_request_id`` names it) had no cache break, read > 0 cached tokens and started
  within the TTL (the predecessor's row is always written first: the hook links a request to
  one that has already finished, and the writer's queue is first in, first out);
- *tokens lost* by a break = the input a stable prefix would have served from cache but the
  request had to prefill again: its input not read from cache (uncached + writes), capped at what
  its predecessor (``previous_request_id``) had in cache (less the request's own cache reads
  for the structural reasons ``anchor_changed``, ``lookback_exceeded`` and ``breakpoint_moved``,
  whose request may still read an earlier breakpoint). That is the predecessor's reads +
  writes where the API reports writes (Anthropic, Bedrock, an OpenAI request with
  ``prompt_cache_breakpoint``, any row with write tokens), and its whole input where caching is
  automatic and no write is reported (OpenAI, Gemini, the engine upstream: every prompt token it
  prefilled is in cache afterwards); 0 for ``below_minimum``: a prompt under the model's
  minimum cacheable prefix is never served from cache, so a stable prefix would have saved
  nothing;
- of those, the first ones are billed as the request's own writes (the lost tokens are the front
  of the prompt, and 1h breakpoints come before 5m ones): ``MIN(lost, 1h writes)`` as 1h writes,
  then ``MIN(the rest, 5m + TTL-unknown writes)`` as 5m writes, the rest as plain input. The
  report prices them at (that rate - cache-read rate).

Schema step 3 (:func:`rebuild_break_rollup`) rebuilds ``report_breaks_hourly`` with these
definitions for logs created before them. Also added here: a partial expression index for
exact TTFT percentiles of hits vs misses and a partial index for example requests per break
reason.
"""

from __future__ import annotations

from typing import Final

from sqlite_utils import Database

from promptcache.usage import USAGE_TOKEN_COLUMNS

from .breaks import READS_KEPT_REASONS
from .dialect import is_postgres

__all__ = [
    "BREAK_COLUMNS",
    "FAMILY_COLUMNS",
    "FAMILY_INDEX",
    "FAMILY_KEY",
    "HOURLY_COLUMNS",
    "ROLLUP_TABLES",
    "add_prefix_families",
    "add_report_rollups",
    "break_rows",
    "family_rows",
    "hourly_rows",
    "rebuild_break_rollup",
    "rebuild_family_rollup",
    "recount_deleted_breaks",
    "zero_below_minimum_losses",
]

ROLLUP_TABLES: Final = ("report_hourly", "report_breaks_hourly", "report_family_hourly")

_HOURLY_SUMS: Final = (
    "requests",
    "requests_with_usage",
    "requests_with_input",
    "hit_requests",
    "hit_ratio_sum",
    *USAGE_TOKEN_COLUMNS,
    "total_input_tokens",
    "cost_usd",
    "cost_without_cache_usd",
    "unpriced_requests",
    "errors",
    "breaks",
    "unexpected_misses",
    "ttft_hit_requests",
    "ttft_miss_requests",
    "write_requests",
)
_READ_BACK: Final = (
    "read_back_requests",
    "read_back_5m_tokens",
    "read_back_1h_tokens",
    "read_back_unknown_tokens",
)

#: The columns of each rollup table, in table order (what :func:`hourly_rows`,
#: :func:`break_rows` and :func:`family_rows` return).
HOURLY_COLUMNS: Final = ("hour", "model", "route", "key_fingerprint", "vendor", *_HOURLY_SUMS,
                         *_READ_BACK)  # fmt: skip
BREAK_COLUMNS: Final = ("hour", "reason", "model", "segment", "breaks", "tokens_lost",
                        "tokens_lost_write_5m", "tokens_lost_write_1h")  # fmt: skip
FAMILY_COLUMNS: Final = ("hour", "key_fingerprint", "model", "prefix_family", "vendor",
                         "requests", "input_tokens", "cache_write_5m_tokens",
                         "cache_write_1h_tokens", "cached_prefix_tokens", "cached_requests",
                         "min_prefix_tokens")  # fmt: skip
#: A request's prefix family id (``requests.prefix_family``, set by the break explainer; a row
#: without one, written before schema step 9 or by hand, is its own first segment's family).
FAMILY_KEY: Final = "COALESCE({r}.prefix_family, {r}.first_segment_hash)"

#: One request's contribution to each ``_HOURLY_SUMS`` column, over ``{r}`` (NEW or a table).
#: A condition counted as a number is spelled ``CASE WHEN c THEN 1 ELSE 0 END`` here and below,
#: not SQLite's bare ``c``, so the same SQL runs on Postgres (:mod:`.dialect`).
_HOURLY_VALUES: Final = """
    1,
    CASE WHEN {r}.total_input_tokens IS NOT NULL THEN 1 ELSE 0 END,
    CASE WHEN COALESCE({r}.total_input_tokens, 0) > 0 THEN 1 ELSE 0 END,
    CASE WHEN COALESCE({r}.cache_read_tokens, 0) > 0 THEN 1 ELSE 0 END,
    CASE WHEN {r}.total_input_tokens > 0
         THEN CAST({r}.cache_read_tokens AS REAL) / {r}.total_input_tokens ELSE 0.0 END,
    COALESCE({r}.uncached_input_tokens, 0),
    COALESCE({r}.cache_read_tokens, 0),
    COALESCE({r}.cache_write_5m_tokens, 0),
    COALESCE({r}.cache_write_1h_tokens, 0),
    COALESCE({r}.cache_write_unknown_tokens, 0),
    COALESCE({r}.output_tokens, 0),
    COALESCE({r}.total_input_tokens, 0),
    COALESCE(CAST({r}.cost_usd AS REAL), 0.0),
    COALESCE(CAST({r}.cost_without_cache_usd AS REAL), 0.0),
    CASE WHEN {r}.cost_usd IS NULL AND {r}.total_input_tokens IS NOT NULL THEN 1 ELSE 0 END,
    CASE WHEN {r}.status IS NULL OR {r}.status = 0 OR {r}.status >= 400
              OR {r}.error IS NOT NULL THEN 1 ELSE 0 END,
    CASE WHEN {r}.break_reason IS NOT NULL THEN 1 ELSE 0 END,
    CASE WHEN COALESCE({r}.unexpected_miss, 0) = 1 THEN 1 ELSE 0 END,
    CASE WHEN {r}.ttft_ms IS NOT NULL AND {r}.status >= 200 AND {r}.status < 400
        AND {r}.cache_read_tokens > 0 THEN 1 ELSE 0 END,
    CASE WHEN {r}.ttft_ms IS NOT NULL AND {r}.status >= 200 AND {r}.status < 400
        AND {r}.cache_read_tokens = 0 THEN 1 ELSE 0 END,
    CASE WHEN COALESCE({r}.cache_write_5m_tokens, 0) + COALESCE({r}.cache_write_1h_tokens, 0)
        + COALESCE({r}.cache_write_unknown_tokens, 0) > 0 THEN 1 ELSE 0 END
"""

_HOURLY_KEY_PARTS: Final = (
    ("hour", "CAST({r}.started_at / 3600 AS INTEGER)"),
    ("model", "COALESCE({r}.model, '')"),
    ("route", "COALESCE({r}.route, '')"),
    ("key_fingerprint", "COALESCE({r}.key_fingerprint, '')"),
    ("vendor", "COALESCE({r}.vendor, '')"),
)
#: The ``report_hourly`` key of a request ``{r}``, as aliased SELECT columns.
_HOURLY_KEY: Final = ", ".join(f"{expr} AS {name}" for name, expr in _HOURLY_KEY_PARTS)

_P_WRITES: Final = """(COALESCE(p.cache_write_5m_tokens, 0) + COALESCE(p.cache_write_1h_tokens, 0)
    + COALESCE(p.cache_write_unknown_tokens, 0))"""

#: Break reasons whose cap subtracts the request's own reads (``breaks.READS_KEPT_REASONS``).
_READS_KEPT: Final = "(" + ", ".join(f"'{reason}'" for reason in READS_KEPT_REASONS) + ")"

#: Tokens a break lost (see the module docstring); ``{r}`` the request, ``p`` its predecessor
#: (all NULL when there is none: then 0).
_TOKENS_LOST: Final = f"""
    CASE WHEN {{r}}.break_reason = 'below_minimum' THEN 0 ELSE
    MAX(0, MIN(COALESCE({{r}}.total_input_tokens, 0) - COALESCE({{r}}.cache_read_tokens, 0),
               CASE WHEN p.api IN ('anthropic', 'bedrock_converse')
                         OR COALESCE(p.breakpoints, '[]') <> '[]' OR {_P_WRITES} > 0
                    THEN COALESCE(p.cache_read_tokens, 0) + {_P_WRITES}
                    ELSE COALESCE(p.total_input_tokens, 0) END
               - CASE WHEN {{r}}.break_reason IN {_READS_KEPT}
                      THEN COALESCE({{r}}.cache_read_tokens, 0) ELSE 0 END)) END
"""

#: One break's ``(lost, w1, w5)`` inputs over request ``{r}`` joined to predecessor ``p``.
_LOSS_INPUTS: Final = """{lost} AS lost, COALESCE({r}.cache_write_1h_tokens, 0) AS w1,
    COALESCE({r}.cache_write_5m_tokens, 0) + COALESCE({r}.cache_write_unknown_tokens, 0) AS w5"""
#: ``tokens_lost, tokens_lost_write_1h, tokens_lost_write_5m`` from ``_LOSS_INPUTS``.
_LOSS_SPLIT: Final = (
    "lost AS lost_all, MIN(lost, w1) AS lost_1h, MIN(lost - MIN(lost, w1), w5) AS lost_5m"
)

#: ``(5m, 1h, unknown)`` write tokens of predecessor ``p`` that request ``{r}`` read back.
_READ_BACK_VALUES: Final = """
    CASE WHEN p.vendor = 'engine' OR {r}.started_at - p.started_at <= 300
         THEN COALESCE(p.cache_write_5m_tokens, 0) ELSE 0 END AS w5,
    CASE WHEN p.vendor = 'engine' OR {r}.started_at - p.started_at <= 3600
         THEN COALESCE(p.cache_write_1h_tokens, 0) ELSE 0 END AS w1,
    CASE WHEN p.vendor = 'engine' OR {r}.started_at - p.started_at <= 300
         THEN COALESCE(p.cache_write_unknown_tokens, 0) ELSE 0 END AS wu
"""

#: A request whose predecessor's write it may have read: no break, something read.
_READS_PREDECESSOR: Final = (
    "{r}.previous_request_id IS NOT NULL AND {r}.break_reason IS NULL AND {r}.cache_read_tokens > 0"
)


#: One request's ``report_family_hourly`` row (``requests`` = 1), over ``{r}``, in table order;
#: ``{key}`` is the family key's expression and ``{name}`` its column.
_FAMILY_VALUES_OF: Final = """CAST({r}.started_at / 3600 AS INTEGER) AS hour,
    COALESCE({r}.key_fingerprint, '') AS key_fingerprint, COALESCE({r}.model, '') AS model,
    {key} AS {name}, COALESCE({r}.vendor, '') AS vendor,
    1 AS requests, {r}.total_input_tokens AS input_tokens,
    COALESCE({r}.cache_write_5m_tokens, 0) + COALESCE({r}.cache_write_unknown_tokens, 0)
      AS cache_write_5m_tokens,
    COALESCE({r}.cache_write_1h_tokens, 0) AS cache_write_1h_tokens,
    COALESCE({r}.cache_read_tokens, 0) + COALESCE({r}.cache_write_5m_tokens, 0)
      + COALESCE({r}.cache_write_1h_tokens, 0) + COALESCE({r}.cache_write_unknown_tokens, 0)
      AS cached_prefix_tokens,
    CASE WHEN COALESCE({r}.cache_read_tokens, 0) + COALESCE({r}.cache_write_5m_tokens, 0)
      + COALESCE({r}.cache_write_1h_tokens, 0) + COALESCE({r}.cache_write_unknown_tokens, 0) > 0
      THEN 1 ELSE 0 END AS cached_requests,
    {r}.approx_prefix_tokens AS min_prefix_tokens"""
#: The requests a family row counts.
_IN_FAMILY: Final = "{r}.first_segment_hash IS NOT NULL AND {r}.total_input_tokens IS NOT NULL"
#: The family table's key column before schema step 9 (step 2 creates it so), and since.
_OLD_FAMILY_KEY: Final = "first_segment_hash"
_FAMILY_KEY_COLUMN: Final = "prefix_family"


def _family_values(r: str, name: str = _FAMILY_KEY_COLUMN) -> str:
    """One request's family row over ``r``, keyed by column ``name`` (see the two above)."""
    key = f"{r}.first_segment_hash" if name == _OLD_FAMILY_KEY else FAMILY_KEY.format(r=r)
    return _FAMILY_VALUES_OF.format(r=r, key=key, name=name)


def _family_ddl(name: str) -> str:
    return f"""CREATE TABLE report_family_hourly (
            hour INTEGER NOT NULL, key_fingerprint TEXT NOT NULL, model TEXT NOT NULL,
            {name} TEXT NOT NULL, vendor TEXT NOT NULL,
            requests INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_5m_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_1h_tokens INTEGER NOT NULL DEFAULT 0,
            cached_prefix_tokens INTEGER NOT NULL DEFAULT 0,
            cached_requests INTEGER NOT NULL DEFAULT 0,
            min_prefix_tokens INTEGER,
            PRIMARY KEY (hour, key_fingerprint, model, {name}))"""


_FAMILY_TRIGGER: Final = "report_rollup_family"


def _family_trigger(name: str) -> str:
    n = "NEW"
    upsert = f"""INSERT INTO report_family_hourly (hour, key_fingerprint, model,
          {name}, vendor, requests, input_tokens, cache_write_5m_tokens,
          cache_write_1h_tokens, cached_prefix_tokens, cached_requests, min_prefix_tokens)
        SELECT {_family_values(n, name)} WHERE {_IN_FAMILY.format(r=n)}
        ON CONFLICT (hour, key_fingerprint, model, {name}) DO UPDATE SET
          vendor = MAX(vendor, excluded.vendor), requests = requests + 1,
          input_tokens = input_tokens + excluded.input_tokens,
          cache_write_5m_tokens = cache_write_5m_tokens + excluded.cache_write_5m_tokens,
          cache_write_1h_tokens = cache_write_1h_tokens + excluded.cache_write_1h_tokens,
          cached_prefix_tokens = cached_prefix_tokens + excluded.cached_prefix_tokens,
          cached_requests = cached_requests + excluded.cached_requests,
          min_prefix_tokens = MIN(COALESCE(min_prefix_tokens, excluded.min_prefix_tokens),
                                  COALESCE(excluded.min_prefix_tokens, min_prefix_tokens))"""
    return (
        f"CREATE TRIGGER {_FAMILY_TRIGGER} AFTER INSERT ON requests"
        f" WHEN {_IN_FAMILY.format(r=n)} BEGIN\n{upsert};\nEND"
    )


def _family_backfill(name: str) -> str:
    return f"""INSERT INTO report_family_hourly (hour, key_fingerprint, model, {name},
              vendor, requests, input_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
              cached_prefix_tokens, cached_requests, min_prefix_tokens)
            SELECT hour, key_fingerprint, model, {name}, MAX(vendor), COUNT(*),
              SUM(input_tokens), SUM(cache_write_5m_tokens), SUM(cache_write_1h_tokens),
              SUM(cached_prefix_tokens), SUM(cached_requests), MIN(min_prefix_tokens)
            FROM (SELECT {_family_values("r", name)} FROM requests AS r
                  WHERE {_IN_FAMILY.format(r="r")})
            GROUP BY 1, 2, 3, 4"""


def _ddl() -> list[str]:
    real = ("hit_ratio_sum", "cost_usd", "cost_without_cache_usd")
    sums = ",\n".join(
        f"{c} {'REAL' if c in real else 'INTEGER'} NOT NULL DEFAULT 0"
        for c in (*_HOURLY_SUMS, *_READ_BACK)
    )
    return [
        f"""CREATE TABLE report_hourly (
            hour INTEGER NOT NULL, model TEXT NOT NULL, route TEXT NOT NULL,
            key_fingerprint TEXT NOT NULL, vendor TEXT NOT NULL,
            {sums},
            PRIMARY KEY (hour, model, route, key_fingerprint, vendor))""",
        """CREATE TABLE report_breaks_hourly (
            hour INTEGER NOT NULL, reason TEXT NOT NULL, model TEXT NOT NULL,
            segment TEXT NOT NULL, breaks INTEGER NOT NULL DEFAULT 0,
            tokens_lost INTEGER NOT NULL DEFAULT 0,
            tokens_lost_write_5m INTEGER NOT NULL DEFAULT 0,
            tokens_lost_write_1h INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (hour, reason, model, segment))""",
        _family_ddl(_OLD_FAMILY_KEY),
        # exact TTFT percentiles: walk one class (hit / miss) in ttft order, filter on time
        """CREATE INDEX idx_requests_ttft ON requests
            ((cache_read_tokens > 0), ttft_ms, started_at)
            WHERE ttft_ms IS NOT NULL AND cache_read_tokens IS NOT NULL
              AND status >= 200 AND status < 400""",
        """CREATE INDEX idx_requests_break_reason ON requests (break_reason, started_at)
            WHERE break_reason IS NOT NULL""",
    ]


def _hourly_upsert(values_from: str, sign: str = "+") -> str:
    columns = ", ".join(_HOURLY_SUMS)
    updates = ", ".join(f"{c} = {c} {sign} excluded.{c}" for c in _HOURLY_SUMS)
    return f"""INSERT INTO report_hourly (hour, model, route, key_fingerprint, vendor, {columns})
        {values_from}
        ON CONFLICT (hour, model, route, key_fingerprint, vendor) DO UPDATE SET {updates}"""


def _break_trigger_body() -> str:
    loss = _LOSS_INPUTS.format(lost=_TOKENS_LOST.format(r="NEW"), r="NEW")
    return f"""INSERT INTO report_breaks_hourly (hour, reason, model, segment, breaks,
          tokens_lost, tokens_lost_write_1h, tokens_lost_write_5m)
        SELECT CAST(NEW.started_at / 3600 AS INTEGER), NEW.break_reason, COALESCE(NEW.model, ''),
               COALESCE(NEW.break_segment, ''), 1, {_LOSS_SPLIT}
        FROM (SELECT {loss}
              FROM (SELECT 1) LEFT JOIN requests AS p ON p.id = NEW.previous_request_id)
        WHERE NEW.break_reason IS NOT NULL
        ON CONFLICT (hour, reason, model, segment) DO UPDATE SET
          breaks = breaks + 1, tokens_lost = tokens_lost + excluded.tokens_lost,
          tokens_lost_write_1h = tokens_lost_write_1h + excluded.tokens_lost_write_1h,
          tokens_lost_write_5m = tokens_lost_write_5m + excluded.tokens_lost_write_5m"""


_BREAK_TRIGGER: Final = "report_rollup_break"


def _break_trigger() -> str:
    return (
        f"CREATE TRIGGER {_BREAK_TRIGGER} AFTER INSERT ON requests"
        f" WHEN NEW.break_reason IS NOT NULL BEGIN\n{_break_trigger_body()};\nEND"
    )


def break_rows(
    where: str,
    source: str = "requests",
    *,
    predecessors: str = "requests",
    breaks: int = 1,
) -> str:
    """One row per break of ``source AS r`` (``requests``, or a table of new rows) matching
    ``where``, shaped like a ``report_breaks_hourly`` row (``breaks`` = 1): its hour, reason,
    model, segment and tokens lost (the module docstring's definitions), its predecessor looked
    up in ``predecessors`` (a table or subquery; tokens lost are 0 without one). ``breaks=0``:
    the tokens lost alone (what a request's break lost through a predecessor being deleted)."""
    loss = _LOSS_INPUTS.format(lost=_TOKENS_LOST.format(r="r"), r="r")
    return f"""SELECT hour, reason, model, segment, {breaks} AS breaks, lost_all AS tokens_lost,
                   lost_5m AS tokens_lost_write_5m, lost_1h AS tokens_lost_write_1h
            FROM (SELECT hour, reason, model, segment, {_LOSS_SPLIT}
                  FROM (SELECT CAST(r.started_at / 3600 AS INTEGER) AS hour,
                          r.break_reason AS reason, COALESCE(r.model, '') AS model,
                          COALESCE(r.break_segment, '') AS segment, {loss}
                        FROM {source} AS r
                          LEFT JOIN {predecessors} AS p ON p.id = r.previous_request_id
                        WHERE r.break_reason IS NOT NULL AND ({where})))"""


#: The columns of a request that its successor's tokens lost read (``p`` in
#: :data:`_TOKENS_LOST`), and those its own read (``r``).
_AS_PREDECESSOR: Final = ("id", "api", "breakpoints", "cache_read_tokens", "total_input_tokens",
                          "cache_write_5m_tokens", "cache_write_1h_tokens",
                          "cache_write_unknown_tokens")  # fmt: skip
_AS_BREAK: Final = (*_AS_PREDECESSOR, "started_at", "break_reason", "model", "break_segment",
                    "previous_request_id")  # fmt: skip


def _old_row(columns: tuple[str, ...]) -> str:
    """The deleted row ``OLD`` of a delete trigger as a one-row table of ``columns``."""
    return "(SELECT " + ", ".join(f"OLD.{c} AS {c}" for c in columns) + ")"


def _unbreak_statements() -> list[str]:
    """The delete trigger's ``report_breaks_hourly`` part, row ``OLD`` gone: its own break
    (counted, and the tokens it lost through its predecessor, if that is still logged), and the
    tokens its successors' breaks lost through it (0 now that it is gone, as a report of the
    rows left computes them). So the rollup equals the rows left, whatever order rows go in."""
    own = break_rows("true", _old_row(_AS_BREAK))
    successors = break_rows(
        "r.previous_request_id = OLD.id", predecessors=_old_row(_AS_PREDECESSOR), breaks=0
    )
    return [
        f"""UPDATE report_breaks_hourly SET breaks = breaks - d.n,
              tokens_lost = tokens_lost - d.lost,
              tokens_lost_write_5m = tokens_lost_write_5m - d.lost_5m,
              tokens_lost_write_1h = tokens_lost_write_1h - d.lost_1h
            FROM (SELECT hour AS h, reason AS rs, model AS m, segment AS sg, SUM(breaks) AS n,
                    SUM(tokens_lost) AS lost, SUM(tokens_lost_write_5m) AS lost_5m,
                    SUM(tokens_lost_write_1h) AS lost_1h
                  FROM ({rows}) GROUP BY 1, 2, 3, 4) AS d
            WHERE report_breaks_hourly.hour = d.h AND report_breaks_hourly.reason = d.rs
              AND report_breaks_hourly.model = d.m AND report_breaks_hourly.segment = d.sg"""
        for rows in (own, successors)
    ]


def _break_backfill() -> str:
    return f"""INSERT INTO report_breaks_hourly (hour, reason, model, segment, breaks,
              tokens_lost, tokens_lost_write_1h, tokens_lost_write_5m)
            SELECT hour, reason, model, segment, COUNT(*), SUM(tokens_lost),
                   SUM(tokens_lost_write_1h), SUM(tokens_lost_write_5m)
            FROM ({break_rows("true")})
            GROUP BY 1, 2, 3, 4"""


def hourly_rows(where: str) -> str:
    """``report_hourly``-shaped rows (its columns, in table order) computed from the log: one
    per request of ``requests AS r`` matching ``where`` (read-back columns 0), then one per
    read-back credit to such a request (``p``, the writer) from its successor (all sums 0 but
    the read-back columns), found through ``idx_requests_previous``. Summed, they equal what
    the triggers add to ``report_hourly`` for those requests."""
    zeros = ", ".join("0" for _ in _HOURLY_SUMS)
    return f"""SELECT {_HOURLY_KEY.format(r="r")}, {_HOURLY_VALUES.format(r="r")}, 0, 0, 0, 0
        FROM requests AS r WHERE {where}
        UNION ALL
        SELECT hour, model, route, key_fingerprint, vendor, {zeros},
          CASE WHEN w5 + w1 + wu > 0 THEN 1 ELSE 0 END, w5, w1, wu
        FROM (SELECT {_HOURLY_KEY.format(r="p")}, {_READ_BACK_VALUES.format(r="r")}
              FROM (SELECT * FROM requests AS r WHERE {where}) AS p
              JOIN requests AS r INDEXED BY idx_requests_previous ON r.previous_request_id = p.id
              WHERE {_READS_PREDECESSOR.format(r="r")})"""


def family_rows(where: str, source: str = "requests", name: str = _FAMILY_KEY_COLUMN) -> str:
    """``report_family_hourly``-shaped rows, one per request of ``source AS r`` matching
    ``where`` that a family row counts (keyed by column ``name``); summed
    (``min_prefix_tokens``: the MIN) they equal the rollup's rows for those requests."""
    return (
        f"SELECT {_family_values('r', name)} FROM {source} AS r"
        f" WHERE {_IN_FAMILY.format(r='r')} AND ({where})"
    )


def _triggers() -> list[str]:
    n = "NEW"
    key = ", ".join(expr.format(r=n) for _, expr in _HOURLY_KEY_PARTS)
    hourly = _hourly_upsert(f"VALUES ({key}, {_HOURLY_VALUES.format(r=n)})")
    read_back = f"""UPDATE report_hourly SET
          read_back_requests = read_back_requests
            + CASE WHEN rb.w5 + rb.w1 + rb.wu > 0 THEN 1 ELSE 0 END,
          read_back_5m_tokens = read_back_5m_tokens + rb.w5,
          read_back_1h_tokens = read_back_1h_tokens + rb.w1,
          read_back_unknown_tokens = read_back_unknown_tokens + rb.wu
        FROM (SELECT {_HOURLY_KEY.format(r="p")}, {_READ_BACK_VALUES.format(r=n)}
              FROM requests AS p WHERE p.id = NEW.previous_request_id) AS rb
        WHERE {_READS_PREDECESSOR.format(r=n)}
          AND report_hourly.hour = rb.hour AND report_hourly.model = rb.model
          AND report_hourly.route = rb.route
          AND report_hourly.key_fingerprint = rb.key_fingerprint
          AND report_hourly.vendor = rb.vendor"""
    o = "OLD"
    unhourly = _hourly_upsert(
        f"SELECT {_HOURLY_KEY.format(r=o)}, {_HOURLY_VALUES.format(r=o)} WHERE true", sign="-"
    )
    unbreak = ";\n".join(_unbreak_statements())
    return [
        f"CREATE TRIGGER report_rollup_insert AFTER INSERT ON requests BEGIN\n{hourly};\nEND",
        # the others run only for the rows they concern (WHEN skips the whole body)
        _break_trigger(),
        "CREATE TRIGGER report_rollup_read_back AFTER INSERT ON requests"
        f" WHEN {_READS_PREDECESSOR.format(r=n)} BEGIN\n{read_back};\nEND",
        _family_trigger(_OLD_FAMILY_KEY),
        f"CREATE TRIGGER report_rollup_delete AFTER DELETE ON requests BEGIN\n"
        f"{unhourly};\n{unbreak};\nEND",
    ]


def _backfill() -> list[str]:
    r = "r"
    return [
        _hourly_upsert(
            f"SELECT {_HOURLY_KEY.format(r=r)}, {_HOURLY_VALUES.format(r=r)} FROM requests AS r"
            " WHERE true"
        ),
        _break_backfill(),
        f"""UPDATE report_hourly SET
              read_back_requests = rb.n, read_back_5m_tokens = rb.w5,
              read_back_1h_tokens = rb.w1, read_back_unknown_tokens = rb.wu
            FROM (SELECT hour, model, route, key_fingerprint, vendor,
                    SUM(CASE WHEN w5 + w1 + wu > 0 THEN 1 ELSE 0 END) AS n,
                    SUM(w5) AS w5, SUM(w1) AS w1, SUM(wu) AS wu
                  FROM (SELECT {_HOURLY_KEY.format(r="p")}, {_READ_BACK_VALUES.format(r=r)}
                        FROM requests AS r JOIN requests AS p ON p.id = r.previous_request_id
                        WHERE {_READS_PREDECESSOR.format(r=r)}) AS x
                  GROUP BY 1, 2, 3, 4, 5) AS rb
            WHERE report_hourly.hour = rb.hour AND report_hourly.model = rb.model
              AND report_hourly.route = rb.route
              AND report_hourly.key_fingerprint = rb.key_fingerprint
              AND report_hourly.vendor = rb.vendor""",
        _family_backfill(_OLD_FAMILY_KEY),
    ]


def add_report_rollups(db: Database) -> None:
    """Schema step: create the rollup tables, indexes and triggers, and fill them from the rows
    already logged. Runs inside the migration's transaction (``store.migrate``). On Postgres
    the triggers are statement-level ones over the same SQL (:mod:`.rollup_postgres`)."""
    if is_postgres(db):
        from . import rollup_postgres

        for statement in _ddl():
            db.execute(statement)
        rollup_postgres.install_hourly(db)
        rollup_postgres.install_breaks(db)
        rollup_postgres.install_family(db, _OLD_FAMILY_KEY)
        return
    for statement in (*_ddl(), *_triggers(), *_backfill()):
        db.execute(statement)


def rebuild_break_rollup(db: Database) -> None:
    """Schema step 3: rebuild ``report_breaks_hourly`` (and its trigger) with the tokens-lost
    definition of the module docstring: the predecessor's whole input for automatic caching, and
    the lost tokens the request paid as writes. Refills it from the rows already logged."""
    ddl = next(d for d in _ddl() if d.startswith("CREATE TABLE report_breaks_hourly"))
    if is_postgres(db):
        from . import rollup_postgres

        rollup_postgres.drop(db, _BREAK_TRIGGER)
        db.execute("DROP TABLE IF EXISTS report_breaks_hourly")
        db.execute(ddl)
        rollup_postgres.install_breaks(db)
        return
    db.execute(f"DROP TRIGGER IF EXISTS {_BREAK_TRIGGER}")
    db.execute("DROP TABLE IF EXISTS report_breaks_hourly")
    for statement in (ddl, _break_trigger(), _break_backfill()):
        db.execute(statement)


def recount_deleted_breaks(db: Database) -> None:
    """Schema step 17: deleting a row took only its break count out of
    ``report_breaks_hourly``, so the tokens (and dollars) it lost stayed in the report's figures
    of any window holding its hour; the delete trigger now takes out its tokens lost and those
    its successors lost through it (:func:`_unbreak_statements`), and the rollup is refilled
    from the rows logged, which takes out what earlier deletions left behind."""
    if is_postgres(db):
        from . import rollup_postgres

        rollup_postgres.install_hourly(db)  # its delete trigger holds the breaks part
        rebuild_break_rollup(db)
        return
    db.execute("DROP TRIGGER IF EXISTS report_rollup_delete")
    db.execute(next(t for t in _triggers() if t.startswith("CREATE TRIGGER report_rollup_delete")))
    rebuild_break_rollup(db)


def zero_below_minimum_losses(db: Database) -> None:
    """Schema step 18: a ``below_minimum`` break lost its whole uncached input (capped at its
    predecessor's), though a prompt under the minimum cacheable prefix is never served from
    cache; it now loses 0 tokens (:data:`_TOKENS_LOST`). Reinstalls the triggers that hold that
    definition and refills ``report_breaks_hourly`` from the rows logged."""
    recount_deleted_breaks(db)


def rebuild_family_rollup(db: Database) -> None:
    """Schema step 9: key ``report_family_hourly`` by prefix family (:data:`FAMILY_KEY`, the
    explainer's ``requests.prefix_family``) instead of the first segment's hash, and refill it
    from the rows already logged. Runs after ``requests.prefix_family`` exists and is filled."""
    if is_postgres(db):
        from . import rollup_postgres

        rollup_postgres.drop(db, _FAMILY_TRIGGER)
        db.execute("DROP TABLE IF EXISTS report_family_hourly")
        db.execute(_family_ddl(_FAMILY_KEY_COLUMN))
        rollup_postgres.install_family(db, _FAMILY_KEY_COLUMN)
        return
    db.execute(f"DROP TRIGGER IF EXISTS {_FAMILY_TRIGGER}")
    db.execute("DROP TABLE IF EXISTS report_family_hourly")
    for statement in (
        _family_ddl(_FAMILY_KEY_COLUMN),
        _family_trigger(_FAMILY_KEY_COLUMN),
        _family_backfill(_FAMILY_KEY_COLUMN),
    ):
        db.execute(statement)


#: Index of the families table's per-family queries (key, model, family key, time).
FAMILY_INDEX: Final = "idx_requests_prefix_family"


def add_prefix_families(db: Database) -> None:
    """Schema step 9: ``requests.prefix_family``, its index, and the family rollup keyed by it.

    Rows logged before this step get the family of the request they were compared with
    (``previous_request_id``, followed back to the chain's first request, whose first
    segment's hash names the family), so an old log of an app whose first segment changes
    every request (a timestamp at the top of the system prompt) is grouped as it is now.
    Rows outside any chain keep :data:`FAMILY_KEY`'s fallback, their first segment's hash.
    Idempotent.
    """
    if "prefix_family" not in db.table("requests").columns_dict:
        db.table("requests").add_column("prefix_family", str)
    db.execute(
        """WITH RECURSIVE chain(id, family) AS (
             SELECT id, first_segment_hash FROM requests
             WHERE previous_request_id IS NULL AND first_segment_hash IS NOT NULL
             UNION ALL
             SELECT r.id, chain.family FROM requests AS r INDEXED BY idx_requests_previous
             JOIN chain ON r.previous_request_id = chain.id)
           UPDATE requests SET prefix_family = chain.family FROM chain
           WHERE chain.id = requests.id AND requests.prefix_family IS NULL"""
    )
    db.execute(
        f"CREATE INDEX IF NOT EXISTS {FAMILY_INDEX} ON requests"
        f" (key_fingerprint, model, ({FAMILY_KEY.replace('{r}.', '')}), started_at)"
    )
    rebuild_family_rollup(db)
