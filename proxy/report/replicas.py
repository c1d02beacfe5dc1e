"""Requests by replica: the report section over the routing rollup.

The routing columns and ``report_replica_hourly`` (schema steps 5 and 8) are written and kept
by :mod:`promptcache.proxy.replica_rollup`. :func:`replica_summaries` reads them for
``promptcache report``: one :class:`ReplicaSummary` per replica plus one per upstream
(``replica=None``: the fleet total, the sum of its replicas).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from ..replica_rollup import REPLICA_COLUMNS, REPLICA_SUMS, replica_rows
from .window import EDGES, Window, exact

__all__ = ["ReplicaSummary", "replica_summaries"]


#: ``report_replica_hourly`` over an exact window (:mod:`.window`).
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
    names = [name for name, _ in REPLICA_SUMS]
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
