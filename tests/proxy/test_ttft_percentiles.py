"""Exact TTFT percentiles through the TTFT histogram rollup (``report_ttft_hourly``): the report's
p50 / p95 per cache class equal the nearest-rank percentiles computed here in Python over the
same rows, on SQLite and on Postgres, over windows with partial hours, with TTFTs on and a hair
around the bucket edges, and after rows are deleted (the delete triggers); the rollup equals its
recomputation from ``requests``.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import connect_log
from promptcache.proxy.report import queries as q
from promptcache.proxy.report.window import Window
from promptcache.proxy.store import RequestStore, open_log
from promptcache.proxy.ttft_rollup import BUCKET_MS, TTFT_TABLE

T0 = 1_760_000_400.0  # a whole hour
EDGY = (0.0, 9.999999999999998, 10.0, 10.000000000000002, 29.999999999999996, 30.0, 0.1 * 3)


def ttft_rows(seed: int, n: int = 700) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        values = dict.fromkeys(COLUMN_NAMES)
        ttft = rng.choice(
            [
                rng.choice(EDGY) + BUCKET_MS * rng.randint(0, 30),
                rng.uniform(0, 900),
                float(rng.randint(0, 90) * BUCKET_MS),
                rng.uniform(5000, 30000),
                None,
            ]
        )
        read = rng.choice([0, 0, 500, None])
        values.update(
            id=f"t{seed}-{i}",
            started_at=T0 - 5000 + rng.uniform(0, 6 * 3600),
            vendor="anthropic",
            api="anthropic",
            model="claude-sonnet-4-5",
            status=rng.choice([200, 200, 200, 304, 429, 500, None]),
            stream=1,
            ttft_ms=ttft,
            uncached_input_tokens=10,
            cache_read_tokens=read,
            cache_write_5m_tokens=0,
            cache_write_1h_tokens=0,
            cache_write_unknown_tokens=0,
            output_tokens=3,
            total_input_tokens=None if read is None else 10 + read,
        )
        rows.append(values)
    return rows


def nearest_rank(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * percent / 100)) - 1]


def expected(rows: list[dict[str, Any]], since: float, until: float) -> list[q.TtftRow]:
    out = []
    for hit in (True, False):
        values = [
            r["ttft_ms"]
            for r in rows
            if r["ttft_ms"] is not None
            and r["cache_read_tokens"] is not None
            and r["status"] is not None
            and 200 <= r["status"] < 400
            and (r["cache_read_tokens"] > 0) == hit
            and since <= r["started_at"] < until
        ]
        if values:
            out.append(
                q.TtftRow(hit, len(values), nearest_rank(values, 50), nearest_rank(values, 95))
            )
    return out


WINDOWS = [(T0 - 7200, T0 + 8 * 3600), (T0 - 1234.5, T0 + 3 * 3600 + 77.25), (T0 + 10, T0 + 900)]


def check(conn: Any, rows: list[dict[str, Any]]) -> None:
    for since, until in WINDOWS:
        assert q.ttft_percentiles(conn, Window(since, until)) == expected(rows, since, until)
    rollup = conn.execute(
        f"SELECT hour, hit, bucket, requests FROM {TTFT_TABLE} WHERE requests <> 0"
        " ORDER BY hour, hit, bucket"
    ).fetchall()
    raw = conn.execute(
        f"""SELECT CAST(started_at / 3600 AS INTEGER) AS h,
                   CASE WHEN cache_read_tokens > 0 THEN 1 ELSE 0 END AS c,
                   CAST(ttft_ms / {BUCKET_MS} AS INTEGER) AS b, COUNT(*)
            FROM requests WHERE ttft_ms IS NOT NULL AND cache_read_tokens IS NOT NULL
              AND status >= 200 AND status < 400 GROUP BY h, c, b ORDER BY h, c, b"""
    ).fetchall()
    assert [tuple(r) for r in rollup] == [tuple(r) for r in raw]


def deleted(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    gone = [r["id"] for r in rows[::7]]
    return [r for r in rows if r["id"] not in set(gone)], gone


@pytest.mark.parametrize("seed", range(3))
def test_sqlite_percentiles_are_exact(tmp_path: Path, seed: int) -> None:
    rows = ttft_rows(seed)
    db = open_log(tmp_path / "log.db")
    with db.conn:
        db.table("requests").insert_all(rows)
    conn = connect_log(tmp_path / "log.db")
    try:
        check(conn, rows)
        kept, gone = deleted(rows)
        with db.conn:
            db.conn.executemany("DELETE FROM requests WHERE id = ?", [(i,) for i in gone])
        check(conn, kept)
    finally:
        conn.close()
        db.close()


@pytest.mark.parametrize("seed", range(2))
def test_postgres_percentiles_are_exact(pg_url: str, seed: int) -> None:
    rows = ttft_rows(seed)
    store = RequestStore(pg_url, flush_interval_s=0.05, batch_rows=50)
    store.start()
    for values in rows:
        assert store.submit(values)
    assert store.flush(60)
    store.close()
    conn = connect_log(pg_url)
    try:
        check(conn, rows)
    finally:
        conn.close()
    kept, gone = deleted(rows)
    db = open_log(pg_url)
    try:
        db.conn.execute(
            "DELETE FROM requests WHERE id IN (" + ", ".join("?" for _ in gone) + ")", gone
        )
        db.conn.commit()
    finally:
        db.close()
    conn = connect_log(pg_url)
    try:
        check(conn, kept)
    finally:
        conn.close()
