"""Requests by replica: the log's routing columns, their hourly rollup and the report section.

Schema step 5 (:func:`add_routing_columns`) adds the routing columns to ``requests`` (NULL on
older rows and for upstreams without replicas) and ``report_replica_hourly``, per (UTC hour,
upstream, replica), kept by triggers like the other rollups (``proxy/rollup.py``): requests,
requests with usage, cache hits, cache-read and prompt tokens, errors, and how they were routed.
Schema step 8 (:func:`add_route_regret_columns`) adds the routing regret: per request the
prompt tokens the best-matching replica held (``route_best_tokens``, available) and those the
chosen one held (``route_chosen_tokens``), and their sums to the rollup.

:func:`replica_summaries` reads it for ``promptcache report``: one :class:`ReplicaSummary` per
replica plus one per upstream (``replica=None``: the fleet total, the sum of its replicas).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from sqlite_utils import Database

from .report_window import EDGES, Window, exact

__all__ = [
    "ROUTING_COLUMNS",
    "ReplicaSummary",
    "add_route_regret_columns",
    "add_routing_columns",
    "replica_summaries",
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
_SUMS: Final = (
    ("requests", "1"),
    ("requests_with_usage", "{r}.total_input_tokens IS NOT NULL"),
    ("hit_requests", "COALESCE({r}.cache_read_tokens, 0) > 0"),
    ("cache_read_tokens", "COALESCE({r}.cache_read_tokens, 0)"),
    ("total_input_tokens", "COALESCE({r}.total_input_tokens, 0)"),
    (
        "errors",
        "{r}.status IS NULL OR {r}.status = 0 OR {r}.status >= 400 OR {r}.error IS NOT NULL",
    ),
    ("routed_prefix", "{r}.route_reason IS 'prefix'"),
    ("routed_new_prefix", "{r}.route_reason IS 'new_prefix'"),
    ("routed_overloaded", "{r}.route_reason IS 'overloaded'"),
    ("retried", "COALESCE({r}.route_attempts, 1) > 1"),
    ("available_tokens", "COALESCE({r}.route_best_tokens, 0)"),  # step 8
    ("routed_tokens", "COALESCE({r}.route_chosen_tokens, 0)"),  # step 8
)
#: The sums schema step 5 created the rollup with (the rest are step 8's).
_STEP5_SUMS: Final = _SUMS[:10]
#: ``report_replica_hourly``'s columns, in table order.
REPLICA_COLUMNS: Final = ("hour", "upstream", "replica", *(name for name, _ in _SUMS))
_KEY: Final = "CAST({r}.started_at / 3600 AS INTEGER), COALESCE({r}.upstream, ''), {r}.replica"


def _upsert(r: str, sign: str, source: str, sums: tuple[tuple[str, str], ...] = _SUMS) -> str:
    """Add (``sign="+"``) or subtract (``"-"``) request ``r``'s values into its rollup row."""
    names = ", ".join(name for name, _ in sums)
    values = ", ".join(f"{sign}({expr.format(r=r)})" for _, expr in sums)
    updates = ", ".join(f"{n} = {n} + excluded.{n}" for n, _ in sums)
    return f"""INSERT INTO report_replica_hourly (hour, upstream, replica, {names})
        SELECT {_KEY.format(r=r)}, {values} {source}
        ON CONFLICT (hour, upstream, replica) DO UPDATE SET {updates}"""


def replica_rows(where: str) -> str:
    """``report_replica_hourly``-shaped rows, one per request of ``requests AS r`` matching
    ``where`` that has a replica; summed they equal the rollup's rows for those requests."""
    values = ", ".join(f"{expr.format(r='r')} AS {name}" for name, expr in _SUMS)
    return (
        f"SELECT {_KEY.format(r='r')}, {values} FROM requests AS r"
        f" WHERE r.replica IS NOT NULL AND ({where})"
    )


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
    for name, _ in _SUMS:
        if name not in rollup:
            db.execute(
                f"ALTER TABLE report_replica_hourly ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0"
            )
    _refill(db, _SUMS)


def _refill(db: Database, sums: tuple[tuple[str, str], ...]) -> None:
    """(Re)create the rollup's triggers over ``sums`` and rebuild it from ``requests``."""
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


#: ``report_replica_hourly`` over an exact window (:mod:`.report_window`).
_EXACT: Final = exact("report_replica_hourly", REPLICA_COLUMNS, replica_rows(EDGES))


@dataclass(frozen=True)
class ReplicaSummary:
    """One replica's traffic in the report window, or an upstream's fleet total.

    Attributes:
        upstream: the upstream's name (``[upstreams.NAME]``; ``custom`` for ``--upstream``).
        replica: the replica's base URL; None on the fleet-total row.
        requests: requests sent to it (a retried request counts on the replica that answered).
        share: its fraction of the upstream's requests, in [0, 1].
        requests_with_usage: requests whose response reported token usage.
        hit_requests: requests that read at least 1 cached token.
        cache_read_tokens, total_input_tokens: tokens read from cache, prompt tokens.
        token_hit_rate: cache_read_tokens / total_input_tokens, None without input.
        errors: failed requests (status 0 or >= 400, or an error noted).
        routed_prefix: routed to the replica holding their prefix (``prefix``).
        routed_new_prefix: no replica held any of their prefix (least loaded).
        routed_overloaded: their prefix's replica was over the load margin (least loaded).
        retried: sent here after another replica failed before the response started.
        available_tokens: prompt tokens the best-matching replica held, summed over the
            requests (``route_best_tokens``: what routing could have reused).
        routed_tokens: prompt tokens the replica chosen held (``route_chosen_tokens``: what
            routing reused). Exact for ``kv_events``, approximate for ``prefix``; 0 for policies
            that do not match prefixes.
        max_over_mean: on the fleet-total row, the busiest replica's requests over the mean
            per replica that served any (1.0 = perfectly even); None on replica rows.
    """

    upstream: str
    replica: str | None
    requests: int
    share: float
    requests_with_usage: int
    hit_requests: int
    cache_read_tokens: int
    total_input_tokens: int
    token_hit_rate: float | None
    errors: int
    routed_prefix: int
    routed_new_prefix: int
    routed_overloaded: int
    retried: int
    available_tokens: int = 0
    routed_tokens: int = 0
    max_over_mean: float | None = None

    @property
    def regret_tokens(self) -> int:
        """Prompt tokens a replica held that routing did not use: available - routed."""
        return self.available_tokens - self.routed_tokens

    @property
    def routed_share(self) -> float | None:
        """routed / available tokens, None when nothing was available."""
        return self.routed_tokens / self.available_tokens if self.available_tokens else None


def replica_summaries(conn: sqlite3.Connection, window: Window) -> list[ReplicaSummary]:
    """Per upstream with replicas: its replicas (most requests first), then its total row.

    Args:
        conn: a log at schema step 8 or later.
        window: the report window, exact (the rollup's whole hours plus the edge requests).
    """
    names = [name for name, _ in _SUMS]
    sql = f"""
        SELECT upstream, replica, {", ".join(f"SUM({n})" for n in names)}
        FROM {_EXACT}
        GROUP BY upstream, replica HAVING SUM(requests) > 0 ORDER BY upstream, 3 DESC, replica
    """
    rows = conn.execute(sql, window.params()).fetchall()
    out: list[ReplicaSummary] = []
    for upstream in dict.fromkeys(row[0] for row in rows):
        mine = [row for row in rows if row[0] == upstream]
        total = [sum(row[i] for row in mine) for i in range(2, 2 + len(names))]
        busiest = max(row[2] for row in mine)
        for replica, sums in [*((row[1], list(row[2:])) for row in mine), (None, total)]:
            values = dict(zip(names, sums, strict=True))
            spread = busiest / (total[0] / len(mine)) if replica is None and total[0] else None
            out.append(
                ReplicaSummary(
                    upstream=upstream or "(none)",
                    replica=replica,
                    share=values["requests"] / total[0] if total[0] else 0.0,
                    token_hit_rate=(
                        values["cache_read_tokens"] / values["total_input_tokens"]
                        if values["total_input_tokens"]
                        else None
                    ),
                    max_over_mean=spread,
                    **values,
                )
            )
    return out
