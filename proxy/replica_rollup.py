"""The routing columns of the request log and their hourly rollup, kept by SQLite triggers.

Schema step 5 (:func:`add_routing_columns`) adds the routing columns to ``requests`` (NULL on
older rows and for upstreams without replicas) and ``report_replica_hourly``, per (UTC hour,
upstream, replica), kept by triggers like the other rollups (:mod:`.rollup`): requests,
requests with usage, cache hits, cache-read and prompt tokens, errors, and how they were routed.
Schema step 8 (:func:`add_route_regret_columns`) adds the routing regret: per request the
prompt tokens the best-matching replica held (``route_best_tokens``, available) and those the
chosen one held (``route_chosen_tokens``), and their sums to the rollup.

The report reads them in :mod:`.report.replicas`.
"""

from __future__ import annotations

from typing import Final

from sqlite_utils import Database

from .dialect import is_postgres

__all__ = [
    "REPLICA_COLUMNS",
    "REPLICA_SUMS",
    "ROUTING_COLUMNS",
    "add_route_regret_columns",
    "add_routing_columns",
    "replica_rows",
]

#: The routing columns of ``requests`` (name, SQLite type), in table order.
ROUTING_COLUMNS: Final = (
    ("replica", "TEXT"),
    ("route_policy", "TEXT"),
    ("route_reason", "TEXT"),
    ("route_depth", "INTEGER"),
    ("route_in_flight", "INTEGER"),
    ("route_least_in_flight", "INTEGER"),
    ("route_attempts", "INTEGER"),
    ("route_best_tokens", "INTEGER"),  # step 8
    ("route_chosen_tokens", "INTEGER"),  # step 8
)
#: The columns schema step 5 added (the rest are step 8's).
_STEP5_COLUMNS: Final = ROUTING_COLUMNS[:7]

#: ``report_replica_hourly`` sums and each one's value for a request ``{r}``.
REPLICA_SUMS: Final = (
    ("requests", "1"),
    ("requests_with_usage", "CASE WHEN {r}.total_input_tokens IS NOT NULL THEN 1 ELSE 0 END"),
    ("hit_requests", "CASE WHEN COALESCE({r}.cache_read_tokens, 0) > 0 THEN 1 ELSE 0 END"),
    ("cache_read_tokens", "COALESCE({r}.cache_read_tokens, 0)"),
    ("total_input_tokens", "COALESCE({r}.total_input_tokens, 0)"),
    (
        "errors",
        "CASE WHEN {r}.status IS NULL OR {r}.status = 0 OR {r}.status >= 400"
        " OR {r}.error IS NOT NULL THEN 1 ELSE 0 END",
    ),
    ("routed_prefix", "CASE WHEN {r}.route_reason IS 'prefix' THEN 1 ELSE 0 END"),
    ("routed_new_prefix", "CASE WHEN {r}.route_reason IS 'new_prefix' THEN 1 ELSE 0 END"),
    ("routed_overloaded", "CASE WHEN {r}.route_reason IS 'overloaded' THEN 1 ELSE 0 END"),
    ("retried", "CASE WHEN COALESCE({r}.route_attempts, 1) > 1 THEN 1 ELSE 0 END"),
    ("available_tokens", "COALESCE({r}.route_best_tokens, 0)"),  # step 8
    ("routed_tokens", "COALESCE({r}.route_chosen_tokens, 0)"),  # step 8
)
#: The sums schema step 5 created the rollup with (the rest are step 8's).
_STEP5_SUMS: Final = REPLICA_SUMS[:10]
#: ``report_replica_hourly``'s columns, in table order.
REPLICA_COLUMNS: Final = ("hour", "upstream", "replica", *(name for name, _ in REPLICA_SUMS))
#: The rollup key of a request ``{r}``: hour, upstream, replica.
_KEY_PARTS: Final = ("CAST({r}.started_at / 3600 AS INTEGER)", "COALESCE({r}.upstream, '')",
                     "{r}.replica")  # fmt: skip
_KEY: Final = ", ".join(_KEY_PARTS)


def _upsert(
    r: str, sign: str, source: str, sums: tuple[tuple[str, str], ...] = REPLICA_SUMS
) -> str:
    """Add (``sign="+"``) or subtract (``"-"``) request ``r``'s values into its rollup row."""
    names = ", ".join(name for name, _ in sums)
    values = ", ".join(f"{sign}({expr.format(r=r)})" for _, expr in sums)
    updates = ", ".join(f"{n} = {n} + excluded.{n}" for n, _ in sums)
    return f"""INSERT INTO report_replica_hourly (hour, upstream, replica, {names})
        SELECT {_KEY.format(r=r)}, {values} {source}
        ON CONFLICT (hour, upstream, replica) DO UPDATE SET {updates}"""


def replica_rows(
    where: str, source: str = "requests", sums: tuple[tuple[str, str], ...] = REPLICA_SUMS
) -> str:
    """``report_replica_hourly``-shaped rows, one per request of ``source AS r`` (``requests``
    or a table of new rows) matching ``where`` that has a replica; summed they equal the
    rollup's rows for those requests."""
    values = ", ".join(f"{expr.format(r='r')} AS {name}" for name, expr in sums)
    names = zip(_KEY_PARTS, REPLICA_COLUMNS[:3], strict=True)
    key = ", ".join(f"{expr.format(r='r')} AS {name}" for expr, name in names)
    return f"SELECT {key}, {values} FROM {source} AS r WHERE r.replica IS NOT NULL AND ({where})"


def add_routing_columns(db: Database) -> None:
    """Schema step 5: the routing columns, ``report_replica_hourly`` and its triggers, filled
    from rows already logged (none have a replica before this step). Idempotent."""
    have = db.table("requests").columns_dict
    for name, kind in _STEP5_COLUMNS:
        if name not in have:
            db.execute(f"ALTER TABLE requests ADD COLUMN {name} {kind}")
    sums = ",\n".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name, _ in _STEP5_SUMS)
    db.execute(
        f"""CREATE TABLE IF NOT EXISTS report_replica_hourly (
            hour INTEGER NOT NULL, upstream TEXT NOT NULL, replica TEXT NOT NULL,
            {sums},
            PRIMARY KEY (hour, upstream, replica))"""
    )
    _refill(db, _STEP5_SUMS)


def add_route_regret_columns(db: Database) -> None:
    """Schema step 8: ``route_best_tokens`` and ``route_chosen_tokens`` (NULL on older rows),
    their sums in ``report_replica_hourly`` (0 for older rows), triggers that keep them.
    Idempotent."""
    have = db.table("requests").columns_dict
    for name, kind in ROUTING_COLUMNS:
        if name not in have:
            db.execute(f"ALTER TABLE requests ADD COLUMN {name} {kind}")
    rollup = db.table("report_replica_hourly").columns_dict
    for name, _ in REPLICA_SUMS:
        if name not in rollup:
            db.execute(
                f"ALTER TABLE report_replica_hourly ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0"
            )
    _refill(db, REPLICA_SUMS)


def _refill(db: Database, sums: tuple[tuple[str, str], ...]) -> None:
    """(Re)create the rollup's triggers over ``sums`` and rebuild it from ``requests``
    (on Postgres: statement-level triggers over the same SQL, :mod:`.rollup_postgres`)."""
    if is_postgres(db):
        from . import rollup_postgres

        rollup_postgres.install_replica(db, sums)
        return
    db.execute("DROP TRIGGER IF EXISTS report_rollup_replica")
    db.execute("DROP TRIGGER IF EXISTS report_rollup_replica_delete")
    db.execute(
        "CREATE TRIGGER report_rollup_replica AFTER INSERT ON requests"
        f" WHEN NEW.replica IS NOT NULL BEGIN\n{_upsert('NEW', '+', 'WHERE true', sums)};\nEND"
    )
    db.execute(
        "CREATE TRIGGER report_rollup_replica_delete AFTER DELETE ON requests"
        f" WHEN OLD.replica IS NOT NULL BEGIN\n{_upsert('OLD', '-', 'WHERE true', sums)};\nEND"
    )
    db.execute("DELETE FROM report_replica_hourly")
    db.execute(_upsert("r", "+", "FROM requests AS r WHERE r.replica IS NOT NULL", sums))
