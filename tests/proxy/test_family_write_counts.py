"""The TTL advisor's counts computed by the database (``queries.family_write_counts``: a ``LAG``
pass for 5-minute gaps, a recursive walk of index seeks for 1-hour writes) equal the Python
simulation over the same family's start times (``promptcache.ttl.write_counts`` over
``queries.family_start_times``), and so give the same advice, on SQLite and on Postgres.

The logs are seeded random families whose gaps sit on and around the TTL boundaries (exactly
300 s and 3,600 s after a write, a hair under and over), with missing keys and models, over
windows with partial hours at the edges.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import connect_log
from promptcache.proxy.report import queries as q
from promptcache.proxy.report.window import Window
from promptcache.proxy.store import RequestStore, open_log
from promptcache.ttl import advise_ttl, advise_ttl_counts, write_counts

T0 = 1_760_000_400.0  # a whole hour
GAPS = (0.0, 0.5, 1.0, 60.0, 299.0, 299.999, 300.0, 300.001, 301.0, 1200.0, 3599.5, 3600.0,
        3601.0, 7200.0)  # fmt: skip


def family_rows(seed: int, families: int = 6) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for f in range(families):
        key = rng.choice(["k1", "k2", None])
        model = rng.choice(["claude-sonnet-4-5", "claude-haiku-4-5", None])
        at = T0 + rng.uniform(-3000, 3000)
        for _ in range(rng.randint(1, 120)):
            values = dict.fromkeys(COLUMN_NAMES)
            values.update(
                id=f"s{seed}-{len(rows)}",
                started_at=at,
                vendor="anthropic",
                api="anthropic",
                model=model,
                key_fingerprint=key,
                status=rng.choice([200, 200, 500]),
                stream=0,
                uncached_input_tokens=10,
                cache_read_tokens=rng.choice([0, 2000]),
                cache_write_5m_tokens=rng.choice([0, 2000]),
                cache_write_1h_tokens=0,
                cache_write_unknown_tokens=0,
                output_tokens=5,
                total_input_tokens=4010,
                first_segment_hash=f"fam-{f}",
                prefix_family=rng.choice([f"fam-{f}", None]),
                approx_prefix_tokens=2000,
            )
            rows.append(values)
            at += rng.choice(GAPS) if rng.random() < 0.7 else rng.uniform(0, 4000)
    rng.shuffle(rows)  # logged out of time order
    return rows


WINDOWS = [(T0 - 4 * 3600, T0 + 400 * 3600), (T0 - 1234.5, T0 + 5 * 3600 + 77.25), (T0, T0 + 900)]


def check_log(conn: Any, rows: list[dict[str, Any]]) -> int:
    """Compare every family of every window; returns how many families were compared."""
    compared = 0
    for since, until in WINDOWS:
        w = Window(since, until)
        families = q.busiest_families(conn, w, 100)
        for family in families:
            times = q.family_start_times(conn, family, w)
            counts = q.family_write_counts(conn, family, w)
            # an independent count: the rows of this family in the window, from the test's data
            expected_n = sum(
                1
                for r in rows
                if r["key_fingerprint"] == family.key_fingerprint
                and r["model"] == family.model
                and (r["prefix_family"] or r["first_segment_hash"]) == family.first_segment_hash
                and since <= r["started_at"] < until
            )
            assert len(times) == expected_n
            assert counts == write_counts(times)
            assert advise_ttl_counts(counts, 2000, "claude-sonnet-4-5") == advise_ttl(
                times, 2000, "claude-sonnet-4-5"
            )
            compared += 1
    return compared


@pytest.mark.parametrize("seed", range(6))
def test_sqlite_counts_equal_the_simulation(tmp_path: Path, seed: int) -> None:
    rows = family_rows(seed)
    db = open_log(tmp_path / "log.db")
    with db.conn:
        db.table("requests").insert_all(rows)
    db.close()
    conn = connect_log(tmp_path / "log.db")
    try:
        assert check_log(conn, rows) >= 6
        busiest = q.busiest_families(conn, Window(*WINDOWS[0]), 1)[0]
        empty = Window(T0 - 99 * 3600, T0 - 98 * 3600)
        assert q.family_write_counts(conn, busiest, empty) is None
    finally:
        conn.close()


@pytest.mark.parametrize("seed", range(3))
def test_postgres_counts_equal_the_simulation(pg_url: str, seed: int) -> None:
    rows = family_rows(seed)
    store = RequestStore(pg_url, flush_interval_s=0.05, batch_rows=50)
    store.start()
    for values in rows:
        assert store.submit(values)
    assert store.flush(60)
    store.close()
    conn = connect_log(pg_url)
    try:
        assert check_log(conn, rows) >= 6
    finally:
        conn.close()
