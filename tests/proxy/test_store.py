"""The request log: migrations, WAL, batched background writes, locks and crashes (real files)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from promptcache.errors import StoreError
from promptcache.proxy.record import COLUMN_NAMES, RequestRecord
from promptcache.proxy.store import SCHEMA_VERSION, RequestStore, open_log


def row(**fields: object) -> dict[str, object]:
    record = RequestRecord(id=uuid.uuid4().hex, started_at=time.time())
    for name, value in fields.items():
        setattr(record, name, value)
    return record.as_row()


def count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    finally:
        conn.close()


def test_fresh_file_is_migrated_in_wal_mode_with_the_shared_schema(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    open_log(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    versions = conn.execute("SELECT version FROM schema_version").fetchall()
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
    columns = [r[1] for r in conn.execute("PRAGMA table_info(requests)")]
    assert columns == list(COLUMN_NAMES)
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(requests)")}
    assert {
        "idx_requests_started_at",
        "idx_requests_family",
        "idx_requests_model",
        "idx_requests_route",
    } <= indexes
    family = [r[2] for r in conn.execute("PRAGMA index_info(idx_requests_family)")]
    assert family == ["key_fingerprint", "model", "first_segment_hash", "started_at"]
    conn.close()
    open_log(path).close()  # reopening applies nothing twice
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_salt_is_random_per_file_and_stable_across_opens(tmp_path: Path) -> None:
    first = RequestStore(tmp_path / "a.db").salt
    assert RequestStore(tmp_path / "a.db").salt == first
    assert RequestStore(tmp_path / "b.db").salt != first
    assert len(first) == 16


def test_newer_schema_and_non_sqlite_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    open_log(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (?, 0)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=re.escape(f"the request log {path} has schema version")):
        open_log(path)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot open the request log"):
        RequestStore(junk)


def test_close_writes_every_submitted_row(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=1.0, batch_rows=64)
    store.start()
    for i in range(1000):
        assert store.submit(row(model=f"m{i % 3}", status=200))
    store.close()
    assert count(path) == 1000
    assert store.written_rows == 1000
    with pytest.raises(StoreError, match="closed"):
        store.submit(row())


@pytest.mark.parametrize("batch", [1, 3, 64, 85, 500])
def test_every_value_is_stored_exactly_whatever_the_batch_size(
    tmp_path: Path, batch: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Batches are cut into multi-row statements of 64, 16, 4 and 1 rows: every split must put
    # each value, of each type, in its own row and column.
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=1.0, batch_rows=batch)
    store.start()
    sent = [
        row(
            model=f"m{i}",
            status=200 + i,
            latency_ms=i + 0.1 + 1e-9,
            cost_usd=f"0.{i:06d}",
            error=None if i % 2 else "upstream answered 500: é\n",
            stream=i % 2,
        )
        for i in range(batch + 2)
    ]
    for r in sent:
        assert store.submit(r)
    store.close()
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    stored = {r["id"]: dict(r) for r in conn.execute("SELECT * FROM requests")}
    conn.close()
    assert stored == {r["id"]: r for r in sent}
    # ... through the batched statements, not the row-by-row fallback for failed batches
    assert "one by one" not in caplog.text


def test_rows_reach_disk_within_the_flush_interval_without_a_flush_call(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=0.2, batch_rows=10_000)
    store.start()
    try:
        store.submit(row())
        deadline = time.monotonic() + 10
        while count(path) == 0:
            assert time.monotonic() < deadline, "row never committed by the timer"
            time.sleep(0.02)
    finally:
        store.close()


def test_a_reader_holding_a_read_transaction_does_not_block_writes(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=0.05)
    store.start()
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0
        for _ in range(50):
            store.submit(row())
        assert store.flush(timeout_s=10), "writer blocked by a reader"
        assert reader.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0  # snapshot
        assert count(path) == 50
        reader.execute("COMMIT")
    finally:
        reader.close()
        store.close()


def test_another_writer_holding_the_lock_delays_rows_but_loses_none(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=0.05)
    store.start()
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        for _ in range(20):
            assert store.submit(row())  # never blocks
        assert time.monotonic() - started < 1.0
        release = threading.Timer(0.5, blocker.execute, args=("COMMIT",))
        release.start()
        assert store.flush(timeout_s=20)
        release.join()
        assert count(path) == 20
    finally:
        blocker.close()
        store.close()


def test_a_full_queue_drops_and_counts_rows_instead_of_blocking(tmp_path: Path) -> None:
    store = RequestStore(tmp_path / "log.db", queue_rows=5)  # writer not started
    results = [store.submit(row()) for _ in range(8)]
    assert results == [True] * 5 + [False] * 3
    assert store.dropped_rows == 3
    assert store.queue_size() == 5


WRITER = textwrap.dedent(
    """
    import sys, time, uuid
    from promptcache.proxy.record import RequestRecord
    from promptcache.proxy.store import RequestStore
    store = RequestStore(sys.argv[1], flush_interval_s=0.5)
    store.start()
    i = 0
    while True:
        now = time.time()
        i += 1
        store.submit(RequestRecord(id=uuid.uuid4().hex, started_at=now, status=i).as_row())
        if i == 50:
            print("ready", flush=True)
        time.sleep(0.002)
    """
)


def test_kill_9_loses_at_most_the_last_second_of_rows(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(1.5)
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT status, started_at FROM requests ORDER BY status").fetchall()
    conn.close()
    sequence = [seq for seq, _ in rows]
    assert sequence == list(range(1, len(rows) + 1)), "a committed batch has a hole"
    # the newest surviving row was submitted less than a second before the kill
    assert rows[-1][1] >= killed_at - 1.0


def test_a_row_that_fails_loses_only_itself_not_its_batch(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    open_log(path).close()
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TRIGGER reject_bad BEFORE INSERT ON requests WHEN NEW.model = 'bad' "
        "BEGIN SELECT RAISE(ABORT, 'bad row'); END"
    )
    conn.commit()
    conn.close()
    store = RequestStore(path, flush_interval_s=0.05)
    store.start()
    for i in range(10):
        store.submit(row(model="bad" if i == 4 else "good"))
    store.close()
    assert count(path) == 9
    assert (store.written_rows, store.failed_rows) == (9, 1)


def test_values_sqlite_cannot_bind_are_stored_escaped_and_the_writer_lives_on(
    tmp_path: Path,
) -> None:
    # json.loads accepts a lone surrogate ("\ud800") and any integer; SQLite binds neither.
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=0.05)
    store.start()
    bad = [row(model="gpt-\ud800"), row(model="m", output_tokens=2**64)]
    store.submit(row(model="before"))
    for r in bad:
        store.submit(r)
    assert store.flush(10)
    store.submit(row(model="after"))  # the writer thread is still there
    store.close()
    conn = sqlite3.connect(path)
    stored = dict(conn.execute("SELECT id, model FROM requests").fetchall())
    tokens = conn.execute(
        "SELECT output_tokens FROM requests WHERE id = ?", (bad[1]["id"],)
    ).fetchone()[0]
    conn.close()
    assert sorted(stored.values()) == ["after", "before", "gpt-\\ud800", "m"]
    assert tokens == float(2**64)  # decimal text, which an INTEGER column keeps as REAL
    assert (store.written_rows, store.failed_rows) == (4, 0)


def test_none_is_stored_as_null_and_its_look_alikes_as_themselves(tmp_path: Path) -> None:
    """The writer's NULL columns go through the None adapter the store registers (sqlite3's
    lookup without one costs about 1,800 instructions a column): still NULL in the file, in
    every connection of the process, while the text 'None', '', 0 and 0.0 keep their types."""
    assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)](None) is None
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=1.0)
    store.start()
    sent = [
        row(error=None, model=None, status=None, latency_ms=None),
        row(error="None", model="", status=0, latency_ms=0.0),
    ]
    for r in sent:
        assert store.submit(r)
    store.close()
    conn = sqlite3.connect(path)
    try:
        kinds = [
            conn.execute(
                "SELECT typeof(error), typeof(model), typeof(status), typeof(latency_ms),"
                " error, model, status, latency_ms FROM requests WHERE id = ?",
                [r["id"]],
            ).fetchone()
            for r in sent
        ]
        other = conn.execute("SELECT typeof(?), ? IS NULL", [None, None]).fetchone()
    finally:
        conn.close()
    assert kinds[0] == ("null", "null", "null", "null", None, None, None, None)
    assert kinds[1] == ("text", "text", "integer", "real", "None", "", 0, 0.0)
    assert other == ("null", 1)


def test_a_row_without_a_column_stores_null_there_in_a_batch_of_full_rows(
    tmp_path: Path,
) -> None:
    """The writer reads a batch's values with one itemgetter call a row; a row lacking a key
    (a hand-made row) stores NULL in that column and the full rows beside it keep theirs."""
    path = tmp_path / "log.db"
    store = RequestStore(path, flush_interval_s=1.0, batch_rows=3)
    full = [row(model="a", status=200), row(model="b", status=201)]
    short = row(model="c", status=202)
    del short["status"]
    store.start()
    for r in (full[0], short, full[1]):
        assert store.submit(r)
    store.close()
    conn = sqlite3.connect(path)
    try:
        stored = dict(conn.execute("SELECT model, status FROM requests"))
    finally:
        conn.close()
    assert stored == {"a": 200, "b": 201, "c": None}
