"""Deleting rows takes their breaks out of ``report_breaks_hourly``, tokens lost included: the
rollup a report reads for whole hours equals what the rows left give, on SQLite and Postgres."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import build_report, connect_log
from promptcache.proxy.rollup import break_rows
from promptcache.proxy.store import RequestStore, open_log
from promptcache.proxy.store_postgres import PgConnection

T0 = 1764493200.0  # 2025-11-30 09:00 UTC
KEY = "hour, reason, model, segment"
STORED = f"""SELECT {KEY}, breaks, tokens_lost, tokens_lost_write_5m, tokens_lost_write_1h
    FROM report_breaks_hourly
    WHERE breaks <> 0 OR tokens_lost <> 0 OR tokens_lost_write_5m <> 0
      OR tokens_lost_write_1h <> 0
    ORDER BY {KEY}"""
RECOMPUTED = f"""SELECT {KEY}, SUM(breaks), SUM(tokens_lost), SUM(tokens_lost_write_5m),
      SUM(tokens_lost_write_1h)
    FROM ({break_rows("true")}) AS x GROUP BY {KEY} ORDER BY {KEY}"""


def chained_rows(n: int = 240, seed: int = 3) -> list[dict[str, Any]]:
    """Anthropic requests over three hours, most of them breaks whose predecessor is one of the
    three before: each break lost tokens through that predecessor."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        read = rng.choice([0, 0, 800])
        write = rng.choice([0, 1500])
        values = dict.fromkeys(COLUMN_NAMES)
        values.update(
            id=f"c{i:04d}",
            started_at=T0 + i * (3 * 3600 / n) + rng.random(),
            vendor="anthropic",
            api="anthropic",
            route="/v1/messages",
            model="claude-sonnet-4-5",
            key_fingerprint="k1",
            status=200,
            stream=0,
            uncached_input_tokens=40,
            cache_read_tokens=read,
            cache_write_5m_tokens=write,
            cache_write_1h_tokens=0,
            cache_write_unknown_tokens=0,
            total_input_tokens=40 + read + write,
            output_tokens=10,
            first_segment_hash="fam",
            prefix_family="fam",
            break_reason=rng.choice([None, "system_changed", "system_changed", "ttl_expired"]),
            break_segment="system[0].text",
            previous_request_id=rows[-rng.randint(1, min(3, len(rows)))]["id"] if rows else None,
        )
        rows.append(values)
    return rows


def _delete(target: str, statement: str, params: tuple[Any, ...]) -> None:
    if target.startswith("postgresql://"):
        with PgConnection(target) as conn:
            conn.execute(statement, params)
            conn.commit()
        return
    with closing(sqlite3.connect(target)) as conn, conn:
        conn.execute(statement, params)


def _stored_and_recomputed(target: str) -> tuple[list[Any], list[Any]]:
    conn: Any = connect_log(target)
    try:
        stored = [tuple(r) for r in conn.execute(STORED).fetchall()]
        recomputed = [tuple(r) for r in conn.execute(RECOMPUTED).fetchall()]
    finally:
        conn.close()
    return stored, recomputed


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_deleted_rows_leave_no_tokens_lost_behind(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # the delete trigger took 1 from the break count and left the tokens lost: a log pruned
    # of old rows reported more tokens (and dollars) lost than its rows held, e.g. 6,000 tokens
    # for 2 breaks of 2,000 each
    rows = chained_rows()
    if backend == "postgres":
        target: str = request.getfixturevalue("pg_url")
        store = RequestStore(target, flush_interval_s=0.05, batch_rows=50)
        store.start()
        for values in rows:
            assert store.submit(values)
        assert store.flush(60)
        store.close()
    else:
        target = str(tmp_path / "log.db")
        db = open_log(target)
        with db.conn:
            db.table("requests").insert_all(rows)
        db.close()
    stored, recomputed = _stored_and_recomputed(target)
    assert stored == recomputed and sum(r[5] for r in stored) > 0
    # single rows, successors before and after their predecessors
    for index in (200, 150, 151, 199, 10, 12):
        _delete(target, "DELETE FROM requests WHERE id = ?", (rows[index]["id"],))
    # a pruning statement: predecessors and their successors go together
    _delete(target, "DELETE FROM requests WHERE started_at < ?", (T0 + 3600 + 600,))
    stored, recomputed = _stored_and_recomputed(target)
    assert stored == recomputed
    whole_hours = build_report(target, since=T0, until=T0 + 3 * 3600, now=T0 + 4 * 3600)
    inside = build_report(target, since=T0 + 0.5, until=T0 + 3 * 3600 - 0.5, now=T0 + 4 * 3600)
    assert [(r.reason, r.breaks, r.tokens_lost) for r in whole_hours.break_reasons] == [
        (r.reason, r.breaks, r.tokens_lost) for r in inside.break_reasons
    ]


def test_step_17_takes_out_what_earlier_deletions_left(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    db = open_log(path)
    with db.conn:
        db.table("requests").insert_all(chained_rows())
        # a log at step 16 whose rows were pruned: tokens lost kept for breaks no longer logged
        db.conn.execute("UPDATE report_breaks_hourly SET tokens_lost = tokens_lost + 777")
        db.conn.execute("DELETE FROM schema_version WHERE version >= 17")
    db.close()
    with closing(sqlite3.connect(path)) as conn:  # read as it is (a report would migrate it)
        assert conn.execute(STORED).fetchall() != conn.execute(RECOMPUTED).fetchall()
    open_log(path).close()  # migrates
    stored, recomputed = _stored_and_recomputed(str(path))
    assert stored == recomputed
