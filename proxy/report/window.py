"""Exact report windows: every figure of ``promptcache report`` covers ``[since, until)``.

The hourly rollups (:mod:`.rollup`, :mod:`.report.replicas`) make reports fast, but a window
such as "the last 15 minutes" does not start or end on a UTC hour. A :class:`Window` splits
``[since, until)`` into the whole hours inside it, ``[h0, h1)``, read from the rollups, and
its partial edge hours, ``[since, e0)`` and ``[e1, until)``, whose rollup-shaped rows are
computed from ``requests`` itself (through ``idx_requests_started_at``, so their cost grows
with the requests of at most two partial hours). A window inside one hour has no whole hour:
all of it is read from ``requests``.

:func:`exact` builds, for one rollup table, a subquery of "the rollup's rows for the whole
hours ``UNION ALL`` the same rows computed from the edge requests"; queries sum over it as
they summed over the rollup table. The rollup triggers and these raw rows share one
definition per column (:func:`.rollup.hourly_rows` and friends), so the two parts agree.

A request starting at exactly ``h * 3600`` has hour ``h`` in both parts: the edges end where
the whole hours begin (``CAST(started_at / 3600 AS INTEGER)`` is the floor for the log's
positive times, and dividing a double by 3600 cannot round it up into the next hour).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..rollup import (
    BREAK_COLUMNS,
    FAMILY_COLUMNS,
    HOURLY_COLUMNS,
    break_rows,
    family_rows,
    hourly_rows,
)
from ..ttft_rollup import TTFT_COLUMNS, TTFT_TABLE, ttft_rows

__all__ = ["BREAKS", "EDGES", "FAMILIES", "HOURLY", "IN_WINDOW", "TTFT", "Window", "exact"]

#: ``requests AS r`` rows in the window's partial edge hours.
EDGES: Final = (
    "((r.started_at >= :t0 AND r.started_at < :e0) OR (r.started_at >= :e1 AND r.started_at < :t1))"
)
#: ``requests`` rows in the whole window (unqualified ``started_at``).
IN_WINDOW: Final = "started_at >= :t0 AND started_at < :t1"


@dataclass(frozen=True)
class Window:
    """A report window ``[since, until)`` in unix seconds (requests selected by
    ``started_at``), as the named SQL parameters the exact subqueries take.

    Raises:
        ValueError: ``until`` is not later than ``since``.
    """

    since: float
    until: float

    def __post_init__(self) -> None:
        if not self.until > self.since:
            raise ValueError(f"window until {self.until} is not later than since {self.since}")

    @property
    def whole_hours(self) -> tuple[int, int]:
        """``(h0, h1)``: the UTC hour numbers (unix s // 3600) of the whole hours inside the
        window, ``[h0, h1)``; ``h0 >= h1`` when there is none."""
        return math.ceil(self.since / 3600), math.floor(self.until / 3600)

    def params(self, **extra: object) -> dict[str, object]:
        """``t0``/``t1`` (the bounds), ``h0``/``h1`` (whole hours) and ``e0``/``e1`` (where the
        leading edge ends and the trailing edge starts), plus ``extra``."""
        h0, h1 = self.whole_hours
        start, end = h0 * 3600, h1 * 3600
        return {
            "t0": self.since,
            "t1": self.until,
            "h0": h0,
            "h1": h1,
            "e0": min(self.until, start),
            "e1": max(start, end),  # past until when there is no whole hour: no trailing edge
            **extra,
        }


def exact(table: str, columns: Sequence[str], edge_rows: str) -> str:
    """A parenthesised subquery with ``table``'s ``columns``: its rows for the whole hours
    ``[:h0, :h1)``, then ``edge_rows`` (the same columns computed from the edge requests)."""
    names = ", ".join(columns)
    return f"(SELECT {names} FROM {table} WHERE hour >= :h0 AND hour < :h1 UNION ALL {edge_rows})"


#: ``report_hourly`` over the exact window.
HOURLY: Final = exact("report_hourly", HOURLY_COLUMNS, hourly_rows(EDGES))
#: ``report_breaks_hourly`` over the exact window.
BREAKS: Final = exact("report_breaks_hourly", BREAK_COLUMNS, break_rows(EDGES))
#: ``report_family_hourly`` over the exact window.
FAMILIES: Final = exact("report_family_hourly", FAMILY_COLUMNS, family_rows(EDGES))
#: ``report_ttft_hourly`` over the exact window.
TTFT: Final = exact(TTFT_TABLE, TTFT_COLUMNS, ttft_rows(EDGES))
