"""The request log: a SQLite file (WAL mode) written by one background thread.

Forwarding never touches the disk. The request path hands a finished row to ``RequestStore.submit``,
which only puts it on a bounded queue; a writer thread takes rows off the queue and inserts them in
batches, one transaction per batch, committing at least every ``flush_interval_s`` (at most 1 s) or
as soon as ``batch_rows`` rows wait. So a ``kill -9`` loses at most the rows of the last interval,
and ``close()`` (a clean shutdown) writes every row it was given.

WAL mode lets readers (``promptcache report``, a ``sqlite3`` shell) read while the writer writes;
a reader that holds a transaction open for minutes only keeps the WAL file from being
checkpointed. A writer elsewhere holding the write lock makes our writer wait and retry, never the
request path. If the queue is full (the disk stalled for longer than ``queue_rows`` requests), new
rows are dropped and counted in ``dropped_rows`` rather than slowing forwarding down.

The schema is versioned: ``MIGRATIONS`` lists numbered steps, applied in order inside
``BEGIN IMMEDIATE`` transactions (so two proxies starting on one file do not race), and recorded in
``schema_version``.
"""

from __future__ import annotations

import logging
import queue
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from promptcache.errors import StoreError

from .rollup import add_report_rollups

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "RequestStore", "migrate", "open_log"]

logger = logging.getLogger("promptcache.proxy.store")

#: Seconds a connection waits for another connection's lock before giving up (then we retry).
BUSY_TIMEOUT_S = 5.0


def _v1_requests(db: Database) -> None:
    """Create ``requests`` (one row per request), its indexes, and ``proxy_settings`` (salt)."""
    text, real, integer = str, float, int
    db.table("requests").create(
        {
            "id": text,
            "started_at": real,
            "first_byte_at": real,
            "ended_at": real,
            "ttft_ms": real,
            "latency_ms": real,
            "vendor": text,
            "api": text,
            "route": text,
            "upstream": text,
            "model": text,
            "key_fingerprint": text,
            "status": integer,
            "error": text,
            "stream": integer,
            "uncached_input_tokens": integer,
            "cache_read_tokens": integer,
            "cache_write_5m_tokens": integer,
            "cache_write_1h_tokens": integer,
            "cache_write_unknown_tokens": integer,
            "output_tokens": integer,
            "reasoning_tokens": integer,
            "total_input_tokens": integer,
            "usage_json": text,
            "usage_warnings": text,
            "vendor_cost_usd": text,
            "cost_usd": text,
            "cost_without_cache_usd": text,
            "segment_hashes": text,
            "prefix_hash": text,
            "first_segment_hash": text,
            "approx_prefix_tokens": integer,
            "breakpoints": text,
            "break_reason": text,
            "break_segment": text,
            "break_offset": integer,
            "break_excerpt": text,
            "previous_request_id": text,
            "expected_hit": integer,
            "unexpected_miss": integer,
            "vendor_miss_reason": text,
            "request_body": text,
            "response_body": text,
        },
        pk="id",
        not_null={"started_at", "stream"},
    )
    table = db.table("requests")
    table.create_index(["started_at"], index_name="idx_requests_started_at")
    table.create_index(
        ["key_fingerprint", "model", "first_segment_hash", "started_at"],
        index_name="idx_requests_family",
    )
    table.create_index(["model"], index_name="idx_requests_model")
    table.create_index(["route"], index_name="idx_requests_route")
    db.table("proxy_settings").create({"key": text, "value": text}, pk="key")
    db.table("proxy_settings").insert({"key": "key_salt", "value": secrets.token_hex(16)})


#: Schema steps; step i (0-based) brings the file to version i + 1. Append, never edit.
MIGRATIONS: tuple[Callable[[Database], None], ...] = (_v1_requests, add_report_rollups)
SCHEMA_VERSION = len(MIGRATIONS)


def open_log(path: Path | str) -> Database:
    """Open (creating if needed) a request log, in WAL mode, migrated to ``SCHEMA_VERSION``.

    Raises:
        StoreError: the file cannot be opened or written, is not SQLite, or was written by a
            newer promptcache.
    """
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
        db = Database(conn)
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: commits survive a process kill
        migrate(db)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the request log {path}: {exc}") from exc
    return db


def migrate(db: Database) -> int:
    """Apply the missing ``MIGRATIONS`` to ``db``; returns the resulting schema version.

    Raises:
        StoreError: the file's schema is newer than this promptcache knows.
        sqlite3.Error: a step failed (its transaction is rolled back).
    """
    conn = db.conn
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version"
        " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    conn.commit()
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version"
            ).fetchone()
            version = int(current[0])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the request log has schema version {version}, newer than this promptcache "
                    f"({SCHEMA_VERSION}); upgrade promptcache or use another --db file"
                )
            if version == SCHEMA_VERSION:
                conn.execute("COMMIT")
                return version
            MIGRATIONS[version](db)
            conn.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                (version + 1, time.time()),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


_STOP = object()


class RequestStore:
    """Batched, off-thread writer of ``requests`` rows.

    Args:
        path: the SQLite file; created and migrated on construction.
        flush_interval_s: a queued row is committed within this many seconds (0 < x <= 1).
        batch_rows: commit as soon as this many rows wait.
        queue_rows: rows that may wait for the writer; more are dropped (``dropped_rows``).

    Raises:
        StoreError: the file cannot be opened or migrated.

    Call ``start()`` before ``submit()``; ``close()`` writes everything submitted and stops.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        flush_interval_s: float = 0.5,
        batch_rows: int = 500,
        queue_rows: int = 20_000,
    ) -> None:
        self.path = Path(path)
        self.flush_interval_s = flush_interval_s
        self.batch_rows = batch_rows
        db = open_log(self.path)
        try:
            row = db.execute("SELECT value FROM proxy_settings WHERE key = 'key_salt'").fetchone()
        finally:
            db.close()
        #: per-database random salt for key fingerprints (bytes)
        self.salt: bytes = bytes.fromhex(row[0])
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_rows)
        self._thread = threading.Thread(
            target=self._run, name="promptcache-log-writer", daemon=True
        )
        self._closed = False
        #: rows committed so far
        self.written_rows = 0
        #: rows dropped because the queue was full
        self.dropped_rows = 0
        #: rows lost to a write error other than a lock timeout (logged)
        self.failed_rows = 0

    def queue_size(self) -> int:
        """Rows (and flush requests) waiting for the writer thread right now."""
        return self._queue.qsize()

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def submit(self, row: dict[str, Any]) -> bool:
        """Queue one row; never blocks. Returns False (and counts it) if the queue is full."""
        if self._closed:
            raise StoreError("the request log is closed; rows can no longer be submitted")
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            self.dropped_rows += 1
            if self.dropped_rows == 1 or self.dropped_rows % 1000 == 0:
                logger.warning(
                    "request log queue full (%d rows waiting): dropped %d rows so far; "
                    "is the disk of %s stalled?",
                    self._queue.maxsize,
                    self.dropped_rows,
                    self.path,
                )
            return False
        return True

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Block until every row submitted before this call is committed; False on timeout."""
        done = threading.Event()
        self._queue.put(done, timeout=timeout_s)
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        """Write every queued row, then stop the writer thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                logger.error("request log writer did not finish within %.0f s", timeout_s)

    def _run(self) -> None:
        db = open_log(self.path)
        pending: list[dict[str, Any]] = []
        waiters: list[threading.Event] = []
        deadline = 0.0
        stop = False
        try:
            while not stop:
                timeout = max(0.0, deadline - time.monotonic()) if pending else None
                try:
                    item = self._queue.get(timeout=timeout)
                except queue.Empty:
                    item = None
                while item is not None:
                    if item is _STOP:
                        stop = True
                    elif isinstance(item, threading.Event):
                        waiters.append(item)
                    else:
                        if not pending:
                            deadline = time.monotonic() + self.flush_interval_s
                        pending.append(item)
                        if len(pending) >= self.batch_rows:
                            break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        item = None
                due = time.monotonic() >= deadline or len(pending) >= self.batch_rows
                if pending and (due or waiters or stop):
                    self._write(db, pending, final=stop)
                if not pending:
                    for waiter in waiters:
                        waiter.set()
                    waiters.clear()
        finally:
            db.close()

    def _write(self, db: Database, rows: list[dict[str, Any]], *, final: bool) -> None:
        """Insert ``rows`` in one transaction; on success clears ``rows``.

        A lock held elsewhere longer than ``BUSY_TIMEOUT_S`` leaves the rows pending for the next
        round (or retries now, on the final flush). Any other SQLite error (a constraint or
        trigger failing, a full disk) retries the rows one by one, so only the rows that fail
        are lost: each is logged with its id and counted in ``failed_rows``.
        """
        attempts = 0
        while True:
            try:
                _insert(db, rows)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    break
                attempts += 1
                logger.warning("request log is locked by another writer (%s); retrying", exc)
                if final and attempts < 12:
                    continue
                return
            except sqlite3.Error:
                break
            else:
                self.written_rows += len(rows)
                rows.clear()
                return
        for row in rows:
            try:
                _insert(db, [row])
            except sqlite3.Error as exc:
                self.failed_rows += 1
                logger.error("request log: row %s could not be written: %s", row.get("id"), exc)
            else:
                self.written_rows += 1
        rows.clear()


def _insert(db: Database, rows: list[dict[str, Any]]) -> None:
    with db.atomic():
        db.table("requests").insert_all(rows, batch_size=len(rows))
