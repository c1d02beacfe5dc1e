"""The proxy's log writer keeps the report rollups with one statement a rollup and batch, its
connection's row triggers off (proxy/writer_rollups.py): the rollups must equal, to the bit,
what the row triggers make of the same rows, and every other connection keeps the triggers."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.store import RequestStore, _write_batch, open_log
from promptcache.proxy.writer_rollups import take_over

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC
TABLES = (
    "report_hourly",
    "report_breaks_hourly",
    "report_family_hourly",
    "report_replica_hourly",
    "report_ttft_hourly",
    "report_family_gaps_hourly",
)


def invented_rows(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """Rows of every shape the rollups read: several hours, models, keys, vendors, replicas,
    errors, unpriced rows, breaks of each kind, predecessors in the same batch and earlier
    ones (started less and more than 5 minutes and an hour before), TTFT and NULLs."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(count):
        row = dict.fromkeys(COLUMN_NAMES)
        read, w5, w1, wu = (rng.choice([0, 0, 64, 1024, 3000]) for _ in range(4))
        uncached = rng.choice([0, 5, 300])
        usage = rng.random() < 0.85
        row.update(
            id=f"r{i:04d}",
            started_at=T0 + i * rng.choice([0.0, 7.5, 150.0, 400.0]) + rng.random(),
            stream=i % 2,
            status=rng.choice([200, 200, 200, 429, 500, None]),
            error=rng.choice([None, None, None, "upstream answered 500"]),
            vendor=rng.choice(["anthropic", "openai", "engine", None]),
            api=rng.choice(["anthropic", "openai_chat", "bedrock_converse"]),
            route=rng.choice(["/v1/messages", "/v1/chat/completions", None]),
            model=rng.choice(["m1", "m2", None]),
            key_fingerprint=rng.choice(["k1", "k2", None]),
            ttft_ms=rng.choice([None, 3.25, 17.5, 120.125]),
            breakpoints=rng.choice([None, "[]", '[{"at": 1}]']),
            first_segment_hash=rng.choice([None, "f1", "f2", "f3"]),
            prefix_family=rng.choice([None, "f1", "p9"]),
            approx_prefix_tokens=rng.choice([None, 12, 400]),
            replica=rng.choice([None, "http://a", "http://b"]),
            route_reason=rng.choice([None, "prefix", "new_prefix", "overloaded"]),
            route_attempts=rng.choice([None, 1, 2]),
            route_best_tokens=rng.choice([None, 0, 256]),
            route_chosen_tokens=rng.choice([None, 0, 128]),
            unexpected_miss=rng.choice([None, 0, 1]),
        )
        if usage:
            row.update(
                uncached_input_tokens=uncached,
                cache_read_tokens=read,
                cache_write_5m_tokens=w5,
                cache_write_1h_tokens=w1,
                cache_write_unknown_tokens=wu,
                output_tokens=rng.choice([0, 9]),
                total_input_tokens=uncached + read + w5 + w1 + wu,
                cost_usd=rng.choice([None, f"0.{rng.randrange(10**8):08d}", "1.1"]),
                cost_without_cache_usd=rng.choice([None, f"0.{rng.randrange(10**8):08d}"]),
            )
        if i and rng.random() < 0.7:
            row["previous_request_id"] = rows[rng.randrange(max(0, i - 12), i)]["id"]
            if rng.random() < 0.5:
                row["break_reason"] = rng.choice(
                    ["system_changed", "history_rewritten", "anchor_changed", "new_prefix"]
                )
                row["break_segment"] = rng.choice([None, "system", "messages[1]"])
        rows.append(row)
    return rows


def rollups(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {
            t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4").fetchall() for t in TABLES
        }
    finally:
        conn.close()


def through_triggers(path: Path, rows: list[dict[str, Any]]) -> Path:
    db = open_log(path)
    with db.conn:
        db.table("requests").insert_all(rows, batch_size=5)
    db.close()
    return path


@pytest.mark.parametrize("batch", [2, 7, 50])
def test_the_writer_keeps_every_rollup_as_the_row_triggers_do(tmp_path: Path, batch: int) -> None:
    """Batches of 2 rows go in through the triggers (fewer than BATCH_STATEMENT_MIN_ROWS),
    of 7 and 50 through the batch statements: the same rollups either way."""
    rows = invented_rows(300)
    store = RequestStore(tmp_path / "writer.db", flush_interval_s=1.0, batch_rows=batch)
    store.start()
    for row in rows:
        assert store.submit(row)
    store.close()
    assert store.written_rows == len(rows)
    assert store._rollups is not None and len(store._rollups.statements) == 6  # took over
    made = rollups(tmp_path / "writer.db")
    assert made == rollups(through_triggers(tmp_path / "triggers.db", rows))
    assert all(made[t] for t in TABLES)  # every rollup has rows to compare


def test_another_connection_still_inserts_through_the_row_triggers(tmp_path: Path) -> None:
    rows = invented_rows(40, seed=11)
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=1.0, batch_rows=10)
    store.start()
    for row in rows[:20]:
        assert store.submit(row)
    assert store.flush()
    other = open_log(path)  # a second program on the same file, between two batches
    with other.conn:
        other.table("requests").insert_all(rows[20:30])
    other.close()
    for row in rows[30:]:
        assert store.submit(row)
    store.close()
    assert rollups(path) == rollups(through_triggers(tmp_path / "triggers.db", rows))
    conn = sqlite3.connect(path)
    try:
        counted = conn.execute("SELECT SUM(requests) FROM report_hourly").fetchone()[0]
    finally:
        conn.close()
    assert counted == len(rows)  # each row once: neither missed nor counted twice


def test_without_the_switch_the_writer_inserts_through_the_triggers(tmp_path: Path) -> None:
    """An in-memory log has no file to check the connection's handle against, so its triggers
    stay on, and the batches go through them."""
    rows = invented_rows(60, seed=3)
    db = open_log(":memory:")
    writer = take_over(db.conn)
    assert writer.statements == ()
    for first in range(0, len(rows), 9):
        _write_batch(db, rows[first : first + 9], writer)
    made = {t: db.conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4").fetchall() for t in TABLES}
    db.close()
    assert made == rollups(through_triggers(tmp_path / "triggers.db", rows))


def test_a_trigger_dropped_by_another_connection_is_dropped_for_the_writer_too(
    tmp_path: Path,
) -> None:
    """The writer checks the schema's version before each batch: after another connection
    drops the break rollup's trigger, the writer's next rows add no breaks either (as the
    triggers would not), while its earlier rows' breaks stay counted."""
    rows = [r | {"break_reason": "system_changed"} for r in invented_rows(30, seed=5)]
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=1.0, batch_rows=5)
    store.start()
    for row in rows[:15]:
        assert store.submit(row)
    assert store.flush()
    other = sqlite3.connect(path)
    with other:
        other.execute("DROP TRIGGER report_rollup_break")
    other.close()
    for row in rows[15:]:
        assert store.submit(row)
    store.close()
    conn = sqlite3.connect(path)
    try:
        breaks = conn.execute("SELECT SUM(breaks) FROM report_breaks_hourly").fetchone()[0]
        hourly = conn.execute("SELECT SUM(requests) FROM report_hourly").fetchone()[0]
    finally:
        conn.close()
    assert breaks == 15
    assert hourly == 30
