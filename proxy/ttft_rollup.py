"""The TTFT histogram rollup: successful requests counted per hour, cache class and TTFT bucket,
so that an exact TTFT percentile reads only the one bucket that holds its rank.

``report_ttft_hourly`` (``hour``, ``hit``, ``bucket``, ``requests``) counts the requests that
the report's TTFT percentiles cover (status 2xx-3xx, ``ttft_ms`` and ``cache_read_tokens``
known; ``hit`` is 1 when ``cache_read_tokens > 0``) per UTC hour and per :data:`BUCKET_MS`-wide
bucket, ``CAST(ttft_ms / BUCKET_MS AS INTEGER)``. That bucket number never decreases as
``ttft_ms`` grows (a correctly rounded division by a positive constant is monotonic, and the
cast truncates), so the k-th fastest request of a class is the (k - requests in lower
buckets)-th fastest of its bucket: :func:`.report.queries.ttft_percentiles` sums the buckets
over the window (:data:`.report.window.TTFT`), then walks ``idx_requests_ttft`` inside that one
bucket, and the result equals the walk over the whole class.

SQLite keeps the table with ``FOR EACH ROW`` triggers (insert and delete), Postgres with
statement-level ones over the same SQL (:mod:`.rollup_postgres`); the schema step fills it
from the rows already logged.
"""

from __future__ import annotations

from typing import Final

from sqlite_utils import Database

from .dialect import is_postgres

__all__ = ["BUCKET_MS", "TTFT_COLUMNS", "TTFT_TABLE", "add_ttft_rollup", "ttft_rows"]

#: Width of one TTFT bucket (ms).
BUCKET_MS: Final = 10
TTFT_TABLE: Final = "report_ttft_hourly"
TTFT_COLUMNS: Final = ("hour", "hit", "bucket", "requests")
#: The requests a TTFT percentile covers, over ``{r}`` (NEW, OLD or a table alias).
COVERED: Final = (
    "{r}.ttft_ms IS NOT NULL AND {r}.cache_read_tokens IS NOT NULL"
    " AND {r}.status >= 200 AND {r}.status < 400"
)
#: One covered request's key columns (hour, hit, bucket), each over ``{r}``.
_KEY: Final = (
    "CAST({r}.started_at / 3600 AS INTEGER)",
    "CASE WHEN {r}.cache_read_tokens > 0 THEN 1 ELSE 0 END",
    f"CAST({{r}}.ttft_ms / {BUCKET_MS} AS INTEGER)",
)
_TRIGGER: Final = "report_ttft_insert"


def ttft_rows(where: str, source: str = "requests") -> str:
    """``report_ttft_hourly``-shaped rows (its columns, in order) computed from ``source AS r``:
    one per covered request matching ``where``, with ``requests`` 1."""
    key = ", ".join(f"{e.format(r='r')} AS {c}" for e, c in zip(_KEY, TTFT_COLUMNS, strict=False))
    return (
        f"SELECT {key}, 1 AS requests FROM {source} AS r WHERE {COVERED.format(r='r')} AND {where}"
    )


def _ddl() -> str:
    return f"""CREATE TABLE {TTFT_TABLE} (
        hour INTEGER NOT NULL, hit INTEGER NOT NULL, bucket INTEGER NOT NULL,
        requests INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (hour, hit, bucket))"""


def _sqlite_triggers() -> list[str]:
    new = ", ".join(e.format(r="NEW") for e in _KEY)
    h, c, b = (e.format(r="OLD") for e in _KEY)
    return [
        f"""CREATE TRIGGER {_TRIGGER} AFTER INSERT ON requests WHEN {COVERED.format(r="NEW")}
        BEGIN
          INSERT INTO {TTFT_TABLE} (hour, hit, bucket, requests) VALUES ({new}, 1)
          ON CONFLICT (hour, hit, bucket) DO UPDATE SET requests = requests + 1;
        END""",
        f"""CREATE TRIGGER {_TRIGGER}_delete AFTER DELETE ON requests
          WHEN {COVERED.format(r="OLD")}
        BEGIN
          UPDATE {TTFT_TABLE} SET requests = requests - 1
          WHERE hour = {h} AND hit = {c} AND bucket = {b};
        END""",
    ]


def add_ttft_rollup(db: Database) -> None:
    """Schema step 14: create ``report_ttft_hourly`` and the triggers that keep it, and fill it
    from the rows already logged (rebuilding them if they exist). Runs inside the migration's
    transaction."""
    if is_postgres(db):
        from . import rollup_postgres

        rollup_postgres.drop(db, _TRIGGER)
        db.execute(f"DROP TABLE IF EXISTS {TTFT_TABLE}")
        db.execute(_ddl())
        rollup_postgres.install_ttft(db, _TRIGGER, ttft_rows)
        return
    for trigger in (_TRIGGER, f"{_TRIGGER}_delete"):
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    db.execute(f"DROP TABLE IF EXISTS {TTFT_TABLE}")
    db.execute(_ddl())
    for statement in _sqlite_triggers():
        db.execute(statement)
    db.execute(
        f"INSERT INTO {TTFT_TABLE} (hour, hit, bucket, requests)"
        f" SELECT hour, hit, bucket, SUM(requests) FROM ({ttft_rows('true')})"
        " GROUP BY hour, hit, bucket"
    )
