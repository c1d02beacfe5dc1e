"""A Postgres log holds and reports exactly what a SQLite log of the same rows does.

The same rows go into a SQLite log (the migrations' triggers keep its rollups) and, through the
proxy's own batched writer, into a Postgres log on a real server (pg_server.py; statement-level
triggers keep its rollups). Every figure of ``promptcache report`` (text, JSON) and of the HTML
page must then be equal, over windows of whole hours and of partial ones; and the Postgres
rollups must equal their raw recomputation from ``requests``.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import page_log
import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.replica_rollup import REPLICA_COLUMNS, replica_rows
from promptcache.proxy.report import build_report, connect_log
from promptcache.proxy.report.page import build_page
from promptcache.proxy.rollup import (
    BREAK_COLUMNS,
    FAMILY_COLUMNS,
    HOURLY_COLUMNS,
    break_rows,
    family_rows,
    hourly_rows,
)
from promptcache.proxy.store import SCHEMA_VERSION, RequestStore, open_log
from promptcache.proxy.store_postgres import PgConnection

T0 = page_log.T0
REASONS = [None, None, "system_changed", "ttl_expired", "new_prefix", "anchor_changed"]


def varied_rows(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` requests over five hours: several models, routes, keys and vendors, chains of
    predecessors (read-backs, breaks), replicas, errors, NULLs, unpriced and priced-as rows."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        at = T0 - 1800 + i * (5 * 3600 / n) + rng.random()
        read = rng.choice([0, 0, 300, 900, None])
        w5, w1, wu = rng.choice([(0, 0, 0), (500, 0, 0), (0, 700, 0), (0, 0, 200)])
        uncached = rng.randint(0, 400)
        total = None if read is None else uncached + read + w5 + w1 + wu
        values = dict.fromkeys(COLUMN_NAMES)
        previous = rows[-rng.randint(1, 3)]["id"] if rows and rng.random() < 0.7 else None
        vendor = rng.choice(["anthropic", "openai", "engine", None])
        values.update(
            id=f"v{i:04d}",
            started_at=at,
            vendor=vendor,
            api="anthropic" if vendor == "anthropic" else "openai",
            route=rng.choice(["/v1/messages", "/v1/chat/completions", None]),
            upstream=rng.choice(["main", "pool"]),
            model=rng.choice(["claude-sonnet-4-5", "gpt-4o", "local-model", None]),
            key_fingerprint=rng.choice(["k1", "k2", None]),
            status=rng.choice([200, 200, 200, 429, 500, 0, None]),
            error=rng.choice([None, None, "upstream reset"]),
            stream=rng.randint(0, 1),
            ttft_ms=rng.choice([None, rng.uniform(50, 900)]),
            uncached_input_tokens=uncached,
            cache_read_tokens=read,
            cache_write_5m_tokens=w5,
            cache_write_1h_tokens=w1,
            cache_write_unknown_tokens=wu,
            output_tokens=rng.randint(1, 200),
            total_input_tokens=total,
            cost_usd=None if rng.random() < 0.1 else f"{rng.uniform(0, 0.02):.6f}",
            cost_without_cache_usd=f"{rng.uniform(0, 0.03):.6f}",
            priced_as="claude-sonnet-4-5" if rng.random() < 0.05 else None,
            first_segment_hash=rng.choice(["fam-x", "fam-y", "fam-z", None]),
            prefix_family=rng.choice(["fam-x", "fam-y", None]),
            approx_prefix_tokens=rng.randint(100, 2000),
            breakpoints=rng.choice([None, "[]", '[{"path": "system[0]", "ttl": "5m"}]']),
            break_reason=rng.choice(REASONS),
            break_segment=rng.choice([None, "system[0].text"]),
            unexpected_miss=rng.choice([None, 0, 1]),
            previous_request_id=previous,
            replica=rng.choice([None, "r1", "r2"]),
            route_reason=rng.choice([None, "prefix", "new_prefix", "overloaded"]),
            route_attempts=rng.choice([None, 1, 2]),
            route_best_tokens=rng.choice([None, 500]),
            route_chosen_tokens=rng.choice([None, 300]),
        )
        rows.append(values)
    return rows


def all_rows() -> list[dict[str, Any]]:
    return [page_log.row(i) for i in range(page_log.N)] + varied_rows(600)


def sqlite_log(path: Path, rows: list[dict[str, Any]]) -> Path:
    db = open_log(path)
    with db.conn:
        db.table("requests").insert_all(rows)
    db.close()
    return path


def postgres_log(url: str, rows: list[dict[str, Any]]) -> str:
    """Write ``rows`` through the proxy's own writer (batches of 50: many statements)."""
    store = RequestStore(url, flush_interval_s=0.05, batch_rows=50)
    store.start()
    for values in rows:
        assert store.submit(values)
    assert store.flush(60)
    store.close()
    assert (store.written_rows, store.failed_rows, store.dropped_rows) == (len(rows), 0, 0)
    return url


WINDOWS = [
    (T0 - 3600, T0 + 6 * 3600),  # whole hours plus edges: the rollups
    (T0 - 1234.5, T0 + 3 * 3600 + 77.25),  # partial hours at both ends
    (T0 + 10, T0 + 100),  # inside one hour: raw rows only
]


@pytest.mark.parametrize(("since", "until"), WINDOWS)
def test_report_and_page_equal_sqlite(
    tmp_path: Path, pg_url: str, since: float, until: float
) -> None:
    rows = all_rows()
    lite = sqlite_log(tmp_path / "log.db", rows)
    postgres_log(pg_url, rows)
    now = T0 + 2 * 3600
    for group_by in (None, "model", "day", "hour", "key"):
        a = build_report(lite, since=since, until=until, group_by=group_by, now=now)
        b = build_report(pg_url, since=since, until=until, group_by=group_by, now=now)
        assert b.total.requests > 0
        assert_same(dataclasses.asdict(dataclasses.replace(b, db=a.db)), dataclasses.asdict(a))
    page_a = build_page(a)
    page_b = build_page(b)
    assert_same(
        dataclasses.asdict(dataclasses.replace(page_b, report=a)),
        dataclasses.asdict(dataclasses.replace(page_a, report=a)),
    )


def assert_same(b: Any, a: Any, where: str = "") -> None:
    """``b`` equals ``a``; floats to 1e-9 relative (the two databases add doubles in their
    own order)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(b) == list(a), where
        for key in a:
            assert_same(b[key], a[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(b) == len(a), where
        for i, (x, y) in enumerate(zip(b, a, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-9, abs=1e-12), where
    else:
        assert b == a, where


def test_postgres_rollups_equal_the_raw_rows(pg_url: str) -> None:
    postgres_log(pg_url, all_rows())
    conn: Any = connect_log(pg_url)
    try:
        checks = [
            ("report_hourly", HOURLY_COLUMNS, hourly_rows("true"), 5),
            ("report_breaks_hourly", BREAK_COLUMNS, break_rows("true"), 4),
            ("report_family_hourly", FAMILY_COLUMNS, family_rows("true"), 4),
            ("report_replica_hourly", REPLICA_COLUMNS, replica_rows("true"), 3),
        ]
        for table, columns, raw, keys in checks:
            key = ", ".join(columns[:keys])
            values = ", ".join(
                f"{'MAX' if c == 'vendor' else 'MIN' if c == 'min_prefix_tokens' else 'SUM'}({c})"
                for c in columns[keys:]
            )
            recomputed = conn.execute(
                f"SELECT {key}, {values} FROM ({raw}) AS x ({', '.join(columns)})"
                f" GROUP BY {key} ORDER BY {key}"
            ).fetchall()
            stored = conn.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
            assert len(stored) > 1, table
            assert_same(stored, recomputed, table)
    finally:
        conn.close()


def test_schema_matches_sqlite(tmp_path: Path, pg_url: str) -> None:
    lite = open_log(tmp_path / "log.db")
    pg = open_log(pg_url)
    try:
        tables = [
            r[0]
            for r in lite.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
        ]
        assert "requests" in tables
        for table in tables:
            assert list(pg.table(table).columns_dict) == list(lite.table(table).columns_dict), table
        assert pg.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        lite.close()
        pg.close()


def test_deleting_rows_subtracts_them_from_the_rollups(tmp_path: Path, pg_url: str) -> None:
    rows = all_rows()
    lite = sqlite_log(tmp_path / "log.db", rows)
    postgres_log(pg_url, rows)
    with PgConnection(pg_url) as conn:
        conn.execute("DELETE FROM requests WHERE started_at < ?", (T0 + 3600,))
        conn.commit()
    db = open_log(lite)
    with db.conn:
        db.execute("DELETE FROM requests WHERE started_at < ?", (T0 + 3600,))
    db.close()
    a = build_report(lite, since=T0 - 7200, until=T0 + 7 * 3600, now=T0)
    b = build_report(pg_url, since=T0 - 7200, until=T0 + 7 * 3600, now=T0)
    assert b.total.requests == a.total.requests < len(rows)
    assert_same(dataclasses.asdict(b.total), dataclasses.asdict(a.total))
    assert_same(
        [dataclasses.asdict(r) for r in b.replicas], [dataclasses.asdict(r) for r in a.replicas]
    )


@pytest.mark.parametrize("breaks", [False, True], ids=["no-breaks", "with-breaks"])
def test_the_page_of_a_window_without_breaks_equals_sqlite(
    tmp_path: Path, pg_url: str, breaks: bool
) -> None:
    """The page shows the latest request's layout when no break names one: a window whose
    requests broke nothing (or that holds none) reads it on Postgres as on SQLite."""
    rows = [r for r in varied_rows(120) if breaks or r["break_reason"] is None]
    assert any(r["break_reason"] for r in rows) is breaks
    lite = sqlite_log(tmp_path / "log.db", rows)
    postgres_log(pg_url, rows)
    for since, until in [WINDOWS[0], (T0 - 9 * 3600, T0 - 8 * 3600)]:  # the rows', an empty one
        a = build_report(lite, since=since, until=until, now=T0 + 3600)
        b = build_report(pg_url, since=since, until=until, now=T0 + 3600)
        page_a = build_page(a)
        page_b = build_page(b)
        assert_same(
            dataclasses.asdict(dataclasses.replace(page_b, report=a)),
            dataclasses.asdict(dataclasses.replace(page_a, report=a)),
        )
