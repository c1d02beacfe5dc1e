"""The request log: a SQLite file (WAL mode) written by one background thread.

Forwarding never touches the disk. The request path hands a finished row to ``RequestStore.submit``,
which only appends it to a bounded in-memory queue; a writer thread wakes at least every
``flush_interval_s`` (at most 1 s), or as soon as ``batch_rows`` rows wait, and inserts what is
queued with one prepared statement and one transaction per batch; the same transaction adds the
batch to the report's rollups, one statement a rollup, its connection's row triggers off
(:mod:`.writer_rollups`). So a ``kill -9`` loses at most the rows of the last interval, and
``close()`` (a clean shutdown) writes every row it was given.

WAL mode lets readers (``promptcache report``, a ``sqlite3`` shell) read while the writer writes;
a reader that holds a transaction open for minutes only keeps the WAL file from being
checkpointed. A writer elsewhere holding the write lock makes our writer wait and retry, never the
request path. If the queue is full (the disk stalled for longer than ``queue_rows`` requests), new
rows are dropped and counted in ``dropped_rows`` rather than slowing forwarding down.

The schema is versioned: ``MIGRATIONS`` lists numbered steps, applied in order inside
``BEGIN IMMEDIATE`` transactions (so two proxies starting on one file do not race), and recorded in
``schema_version``.

The log may instead be a Postgres database (``--db postgresql://user@host/dbname``), which
several proxies write at once: the same migrations run there through the adapters of
:mod:`.store_postgres` (SQL translated by :mod:`.dialect`, rollups kept by
:mod:`.rollup_postgres`), under an advisory lock. Each batch is one ``COPY`` in one
transaction. A batch that fails for want of the server (connection lost, server restarting or
down, deadlock) stays queued and is tried again each flush interval for as long as the server
stays away, while later rows wait behind it in the bounded queue (beyond ``queue_rows`` they are
dropped and counted, as for a stalled disk); ``failing_since`` says since when. Only a stop
gives up on it: ``close()`` keeps trying until its time is nearly out, then counts the rows
still unwritten in ``failed_rows``. A batch the server refuses for its data is written row by
row, as on SQLite.
``kill -9`` of one proxy loses at most its last flush interval of rows, as on SQLite: an
unfinished transaction is rolled back by the server, and every earlier batch is committed.
"""

from __future__ import annotations

import functools
import logging
import operator
import secrets
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from promptcache.errors import StoreError
from promptcache.folders import folder_problem
from promptcache.formatting import plural
from promptcache.usage import USAGE_TOKEN_COLUMNS

from .dialect import is_postgres, is_postgres_url
from .gap_rollup import add_gap_rollup, reseek_gap_triggers
from .prefix_store import add_prefix_bodies
from .redact import redact_url
from .replica_rollup import add_route_regret_columns, add_routing_columns
from .rollup import (
    FAMILY_INDEX,
    FAMILY_KEY,
    add_prefix_families,
    add_report_rollups,
    rebuild_break_rollup,
    recount_deleted_breaks,
    zero_below_minimum_losses,
)
from .ttft_rollup import add_ttft_rollup
from .writer_rollups import TakeOver, take_over

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "RequestStore", "migrate", "open_log"]

logger = logging.getLogger("promptcache.proxy.store")

#: Seconds a connection waits for another connection's lock before giving up (then we retry).
BUSY_TIMEOUT_S = 5.0
#: Seconds between the warnings of a Postgres log whose writes keep failing (the first failure
#: is logged at once, and the write that succeeds again).
FAILING_WARN_EVERY_S = 60.0


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line: libpq writes some over three (``server closed the
    connection unexpectedly`` then a tab-indented hint), which a log line must not split."""
    return " ".join(str(exc).split()) or type(exc).__name__


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
            **dict.fromkeys(USAGE_TOKEN_COLUMNS, integer),
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


def _v4_priced_as(db: Database) -> None:
    """Add ``requests.priced_as`` (NULL on older rows: they were priced at their own model's
    rates or not at all) and a partial index for the report's "priced as" note. Idempotent."""
    if "priced_as" not in db.table("requests").columns_dict:
        db.table("requests").add_column("priced_as", str)
    db.execute(
        "CREATE INDEX IF NOT EXISTS idx_requests_priced_as"
        " ON requests (started_at, model, priced_as) WHERE priced_as IS NOT NULL"
    )


def _v7_previous_index(db: Database) -> None:
    """Index ``requests.previous_request_id`` (partial: rows with a predecessor), so an exact
    report window (:mod:`.report.window`) finds the successors that read a write back without
    scanning the log. Idempotent; older rows keep their values and are indexed as they are."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS idx_requests_previous ON requests (previous_request_id)"
        " WHERE previous_request_id IS NOT NULL"
    )


#: Columns of schema step 10 (vendor cache diagnostics, ``proxy/diagnostics.py``), in order.
VENDOR_DIAGNOSTICS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("response_id", "TEXT"),
    ("vendor_comparison_id", "TEXT"),
    ("vendor_diagnostics_added", "INTEGER"),
    ("vendor_cache_missed_tokens", "INTEGER"),
)


def _v10_vendor_diagnostics(db: Database) -> None:
    """Add the vendor cache-diagnostics columns (NULL on older rows): the response's own id,
    the id the request named for the vendor's comparison, whether the proxy added it, and the
    vendor's estimate of the tokens its cache missed; and a partial index of the rows that
    carry a vendor diagnosis, so the report's agreement table (``report/agreement.py``) reads
    only those. Plain ``ALTER TABLE ... ADD COLUMN`` and ``CREATE INDEX ... WHERE`` (the same
    SQL on SQLite and Postgres); columns already there are left alone. Idempotent."""
    cursor = db.execute("SELECT * FROM requests LIMIT 0")
    have = {column[0] for column in cursor.description}
    for name, kind in VENDOR_DIAGNOSTICS_COLUMNS:
        if name not in have:
            db.execute(f"ALTER TABLE requests ADD COLUMN {name} {kind}")
    db.execute(
        "CREATE INDEX IF NOT EXISTS idx_requests_vendor_diagnosis ON requests (started_at)"
        " WHERE vendor_miss_reason IS NOT NULL"
    )


def _v12_ttft_covering_index(db: Database) -> None:
    """Rebuild ``idx_requests_ttft`` (report TTFT percentiles, :mod:`.rollup`) with the
    columns its queries also read, ``cache_read_tokens`` and ``status``, so a percentile walks
    the index alone, never the table (SQLite and Postgres both read an index without the table
    only when it holds every column the query names). The same SQL on both backends."""
    db.execute("DROP INDEX IF EXISTS idx_requests_ttft")
    db.execute(
        """CREATE INDEX idx_requests_ttft ON requests
            ((cache_read_tokens > 0), ttft_ms, started_at, cache_read_tokens, status)
            WHERE ttft_ms IS NOT NULL AND cache_read_tokens IS NOT NULL
              AND status >= 200 AND status < 400"""
    )


def _v13_family_covering_index(db: Database) -> None:
    """Rebuild the family index (:data:`.rollup.FAMILY_INDEX`) with the plain columns its
    family key is computed from, ``prefix_family`` and ``first_segment_hash``, after its own
    columns: Postgres reads an index without the table only when the index holds every column
    a query names, and it matches an expression's columns, never the expression itself, so the
    TTL advisor's per-family passes (:func:`.report.queries.family_write_counts`) read the index
    alone there too (SQLite already does). The same SQL on both backends."""
    db.execute(f"DROP INDEX IF EXISTS {FAMILY_INDEX}")
    db.execute(
        f"CREATE INDEX {FAMILY_INDEX} ON requests (key_fingerprint, model,"
        f" ({FAMILY_KEY.replace('{r}.', '')}), started_at, prefix_family, first_segment_hash)"
    )


#: Schema steps; step i (0-based) brings the file to version i + 1. Append, never edit.
MIGRATIONS: tuple[Callable[[Database], None], ...] = (
    _v1_requests,
    add_report_rollups,
    rebuild_break_rollup,
    _v4_priced_as,
    add_routing_columns,  # step 5: routing columns and the by-replica rollup (#17)
    rebuild_break_rollup,  # step 6: tokens lost of the lookback reasons (#20)
    _v7_previous_index,  # step 7: successors by predecessor, for exact report windows (#19)
    add_route_regret_columns,  # step 8: routing regret, best vs chosen replica's tokens (#32)
    add_prefix_families,  # step 9: requests grouped into prefix families by shared prefix (#35)
    _v10_vendor_diagnostics,  # step 10: the vendors' own cache diagnostics beside ours (#33)
    add_prefix_bodies,  # step 11: a representative body per prefix family (--store-prefixes)
    _v12_ttft_covering_index,  # step 12: TTFT percentiles read the index alone (#33)
    _v13_family_covering_index,  # step 13: per-family passes read the index alone (#33)
    add_ttft_rollup,  # step 14: TTFT histogram, a percentile reads one bucket's rows (#33)
    add_gap_rollup,  # step 15: 5-minute gaps per family and hour, for the TTL advisor (#33)
    reseek_gap_triggers,  # step 16: the gap triggers' seeks, one bound a side (#32)
    recount_deleted_breaks,  # step 17: a deleted row's tokens lost leave the break rollup too
    zero_below_minimum_losses,  # step 18: a below_minimum break loses no tokens
)
SCHEMA_VERSION = len(MIGRATIONS)


def open_log(path: Path | str) -> Database:
    """Open (creating if needed) a request log, in WAL mode, migrated to ``SCHEMA_VERSION``.

    ``path`` is a SQLite file, or a ``postgresql://`` URL (:func:`.dialect.is_postgres_url`):
    then the result is a :class:`.store_postgres.PgDatabase` over the same schema.

    Raises:
        StoreError: the file cannot be opened or written, is not SQLite, is another program's
            SQLite database (left as it was), or was written by a newer promptcache; the
            Postgres server cannot be reached or refuses the schema.
    """
    if is_postgres_url(path):
        return _open_postgres(str(path))
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the request log {path}: {_open_problem(path, exc)}") from exc
    try:
        _refuse_other_database(conn, path)
        db = Database(conn)
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: commits survive a process kill
        migrate(db, name=str(path))
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot open the request log {path}: {exc}") from exc
        raise
    return db


def _open_problem(path: Path | str, exc: sqlite3.Error) -> str:
    """What to change when SQLite cannot open ``path`` at all: its message ("unable to open
    database file") names neither a missing folder nor a folder given as the file."""
    file = Path(path)
    if file.is_dir():
        return f"{file} is a folder; give the name of a log file"
    problem = folder_problem(file)
    return str(exc) if problem is None else f"{problem}; give another path"


def _refuse_other_database(conn: sqlite3.Connection, path: Path | str) -> None:
    """Refuse a SQLite database that holds tables but no request log (another program's), so
    neither WAL mode nor any table of ours is written into it. A log has ``schema_version``
    and ``requests``, or only ``schema_version`` when its first step never committed.

    Raises:
        StoreError: naming the file and the tables it holds.
        sqlite3.DatabaseError: the file is not a SQLite database.
    """
    tables = sorted(
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite^_%' ESCAPE '^'"  # SQLite's own tables
        )
    )
    if not tables or {"schema_version", "requests"} <= set(tables) or tables == ["schema_version"]:
        return
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    raise StoreError(
        f"{path} is a SQLite database but not a promptcache request log (its tables: {shown}); "
        "it was left as it was: give a new file or a log promptcache wrote"
    )


def _open_postgres(url: str) -> Database:
    from .store_postgres import PgConnection, PgDatabase, redact_url

    # the subset of sqlite_utils.Database the migrations use (store_postgres.py)
    db: Any = PgDatabase(PgConnection(url))
    try:
        _refuse_other_schema(db, redact_url(url))
        migrate(db, name=redact_url(url))
    except Exception as exc:
        db.close()
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"cannot open the request log {redact_url(url)}: {exc}") from exc
    return db  # type: ignore[no-any-return]


def _refuse_read_only(db: Any, url: str) -> None:
    """Refuse a Postgres session that takes no writes: a proxy started on a hot standby (or
    with ``default_transaction_read_only`` set for its database or user) would serve and keep
    every row queued until the queue overflowed. A report may read such a server.

    Raises:
        StoreError: naming the log and what to give.
    """
    from .store_postgres import redact_url

    (value,) = db.execute("SHOW transaction_read_only").fetchone()
    db.conn.commit()
    if str(value).lower() == "on":
        raise StoreError(
            f"the request log {redact_url(url)} takes no writes (transaction_read_only is on: "
            "a hot standby, or default_transaction_read_only set for the database or user); "
            "give the URL of a server that takes writes (the primary)"
        )


def _refuse_other_schema(db: Any, shown: str) -> None:
    """Refuse a Postgres schema that holds a table named like one of the log's but no migrated
    log (no ``schema_version`` row): another program's ``requests``, say. Migrating it would
    fail halfway (``relation "requests" already exists``) and leave ``schema_version`` behind.
    Other programs' tables under other names may share the schema with a log.

    Raises:
        StoreError: naming the database and the clashing tables; nothing was written.
    """
    tables = {
        str(row[0])
        for row in db.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }
    version = 0
    if "schema_version" in tables:
        row = db.conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
        version = int(row[0])
    db.conn.commit()
    if version > 0:
        return
    clash = sorted(tables & _log_tables())
    if clash:
        raise StoreError(
            f"{shown} is not a promptcache request log but holds tables of the same names "
            f"({', '.join(clash)}); it was left as it was: give another database, or one "
            "promptcache wrote"
        )


@functools.cache
def _log_tables() -> frozenset[str]:
    """The tables a log's migrations create (``schema_version`` aside), read off a log
    migrated in memory."""
    conn = sqlite3.connect(":memory:")
    try:
        migrate(Database(conn))
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return frozenset(str(n[0]) for n in names) - {"schema_version"}


#: Postgres advisory lock key held while migrating (two proxies starting at once take turns).
_MIGRATION_LOCK = 0x70636C6F67  # "pclog"


def migrate(db: Database, *, name: str | None = None) -> int:
    """Apply the missing ``MIGRATIONS`` to ``db``; returns the resulting schema version.

    ``name`` is how messages name the log (its path, or its URL with the password masked).

    On Postgres each step runs in a transaction that holds an advisory lock (so two proxies
    starting on one database take turns, as ``BEGIN IMMEDIATE`` makes them on SQLite).

    Raises:
        StoreError: the file's schema is newer than this promptcache knows.
        sqlite3.Error: a step failed (its transaction is rolled back).
    """
    conn = db.conn
    postgres = is_postgres(db)
    if postgres:
        begin = f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"
        conn.execute(begin)
        # created only where missing: CREATE TABLE IF NOT EXISTS needs the CREATE privilege
        # even when the table exists, and a role that only writes rows has none
        if conn.execute("SELECT to_regclass('schema_version')").fetchone()[0] is None:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version"
                " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
            )
        conn.commit()
    else:
        begin = "BEGIN IMMEDIATE"
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version"
            " (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        conn.commit()
    while True:
        conn.execute(begin)
        try:
            current = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version"
            ).fetchone()
            version = int(current[0])
            if version > SCHEMA_VERSION:
                log = f"the request log {name}" if name else "the request log"
                raise StoreError(
                    f"{log} has schema version {version}, newer than this promptcache "
                    f"({SCHEMA_VERSION}); upgrade promptcache, or use another log"
                )
            if version == SCHEMA_VERSION:
                conn.commit()
                return version
            MIGRATIONS[version](db)
            conn.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                (version + 1, time.time()),
            )
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise


class RequestStore:
    """Batched, off-thread writer of ``requests`` rows.

    Args:
        path: the SQLite file; created and migrated on construction.
        flush_interval_s: a submitted row is committed within this many seconds (0 < x <= 1).
        batch_rows: commit as soon as this many rows wait (and at most this many per transaction).
        queue_rows: rows that may wait for the writer; more are dropped (``dropped_rows``).

    Raises:
        StoreError: the file cannot be opened or migrated.

    Call ``start()`` before ``submit()``; ``close()`` writes everything submitted and stops.
    ``submit`` is meant for one thread (the server's event loop); it only appends to a deque, so it
    costs about a microsecond and never wakes the writer unless a batch is full. Rows are dicts
    keyed by column name, all with the keys of ``RequestRecord.as_row()``.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        flush_interval_s: float = 0.5,
        batch_rows: int = 500,
        queue_rows: int = 20_000,
    ) -> None:
        #: the SQLite file, or the ``postgresql://`` URL of a shared log
        self.path: Path | str = str(path) if is_postgres_url(path) else Path(path)
        self.postgres = isinstance(self.path, str)
        self.flush_interval_s = flush_interval_s
        self.batch_rows = batch_rows
        self.queue_rows = queue_rows
        db = open_log(self.path)
        try:
            row = db.execute("SELECT value FROM proxy_settings WHERE key = 'key_salt'").fetchone()
            if self.postgres:
                _refuse_read_only(db, str(self.path))
        finally:
            db.close()
        #: per-database random salt for key fingerprints (bytes)
        self.salt: bytes = bytes.fromhex(row[0])
        self._rows: deque[dict[str, Any]] = deque()
        self._pending: list[dict[str, Any]] = []  # the writer's batch, taken from ``_rows``
        self._wake = threading.Event()
        self._progress = threading.Condition()
        self._accepted = 0  # rows taken by submit()
        self._handled = 0  # rows committed or given up on, in submission order
        self._stopping = False
        self._thread = threading.Thread(
            target=self._run, name="promptcache-log-writer", daemon=True
        )
        self._closed = False
        #: rows committed so far
        self.written_rows = 0
        #: rows dropped because the queue was full
        self.dropped_rows = 0
        #: rows the database refused (constraint, trigger, full disk...), each logged with its
        #: id, and Postgres rows a stop could not write in its time (the server away)
        self.failed_rows = 0
        #: ``time.monotonic()`` since which a Postgres log's writes keep failing (None: they
        #: succeed); the rows wait in the queue meanwhile
        self.failing_since: float | None = None
        self._warned_at = 0.0  # when the latest warning about failing writes was logged
        self._dropped_before = 0  # dropped_rows when the writes began to fail
        self._failed_before = 0  # failed_rows then
        self._stop_deadline = float("inf")  # a stop's last moment to try (close())
        #: how the SQLite writer keeps the rollups (``writer_rollups.take_over``), from its start
        self._rollups: TakeOver | None = None
        #: ``time.monotonic()`` of the latest row dropped or refused (None: none lost yet)
        self.last_loss_at: float | None = None

    def queue_size(self) -> int:
        """Rows waiting to be written right now: queued, or in the batch the writer is trying
        (which a locked file or a Postgres server away keeps unwritten)."""
        return len(self._rows) + len(self._pending)

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def submit(self, row: dict[str, Any]) -> bool:
        """Queue one row; never blocks. Returns False (and counts it) if the queue is full.

        Raises:
            StoreError: the store is closed.
        """
        if self._closed:
            raise StoreError("the request log is closed; rows can no longer be submitted")
        if len(self._rows) >= self.queue_rows:
            self.dropped_rows += 1
            self.last_loss_at = time.monotonic()
            if self.dropped_rows == 1 or self.dropped_rows % 1000 == 0:
                logger.warning(
                    "request log queue full (%d rows waiting): dropped %d rows so far; "
                    "is the disk of %s stalled?",
                    self.queue_rows,
                    self.dropped_rows,
                    redact_url(str(self.path)),
                )
            return False
        self._rows.append(row)
        self._accepted += 1
        if len(self._rows) >= self.batch_rows:
            self._wake.set()
        return True

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Block until every row submitted before this call is committed; False on timeout."""
        target = self._accepted
        self._wake.set()
        with self._progress:
            return (
                self._progress.wait_for(
                    lambda: self._handled >= target or not self._thread.is_alive(), timeout_s
                )
                and self._handled >= target
            )

    def close(self, timeout_s: float = 30.0) -> None:
        """Write every queued row, then stop the writer thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            # a Postgres batch the server does not take is tried until just before the join
            # gives up, then counted as lost by the writer itself (it ends, and says how many)
            self._stop_deadline = time.monotonic() + max(timeout_s - 1.0, timeout_s / 2)
            self._stopping = True
            self._wake.set()
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                with self._progress:
                    unwritten = self._accepted - self._handled
                logger.error(
                    "request log writer did not finish within %.0f s: %s not written (the "
                    "database did not take them in time: a lock, a stalled disk or server); "
                    "they are lost when the process exits",
                    timeout_s,
                    plural(unwritten, "row"),
                )

    def _run(self) -> None:
        if self.postgres:
            self._run_postgres()
            return
        db = open_log(self.path)
        self._rollups = self._take_over()
        pending = self._pending
        try:
            while True:
                self._wake.wait(self.flush_interval_s)
                self._wake.clear()
                stopping = self._stopping
                while True:
                    if not self._fill_batch(pending):
                        break
                    count = len(pending)
                    try:
                        if not self._write(db, pending, final=stopping):
                            break  # locked elsewhere: keep the rows, try again next round
                    except Exception:  # the writer must outlive any one batch
                        self.failed_rows += len(pending)
                        self.last_loss_at = time.monotonic()
                        logger.exception(
                            "request log: %d rows lost (ids %s...)",
                            len(pending),
                            ", ".join(str(r.get("id")) for r in pending[:3]),
                        )
                        pending.clear()
                    self._count_handled(count)
                if stopping and not self._rows and not pending:
                    return
        finally:
            db.close()
            if self._rollups is not None and self._rollups.database is not None:
                self._rollups.database.close()
            with self._progress:
                self._progress.notify_all()

    def _take_over(self) -> TakeOver | None:
        """A second connection to the log, its row triggers off, for the batches the writer
        adds to the rollups itself (``_write_batch``); None where they cannot be turned off."""
        fast = open_log(self.path)
        try:
            writer = take_over(fast.conn)
        except BaseException:
            fast.close()
            raise
        if not writer.statements:
            fast.close()
            return None
        writer.database = fast
        return writer

    def _run_postgres(self) -> None:
        """The writer loop of a Postgres log: like SQLite's, one ``COPY`` per batch
        (:func:`.store_postgres.insert_rows`), reconnecting after a lost connection."""
        from .store_postgres import connect

        assert isinstance(self.path, str)
        conn: Any = None
        pending = self._pending
        try:
            while True:
                self._wake.wait(self.flush_interval_s)
                self._wake.clear()
                stopping = self._stopping
                while True:
                    if not self._fill_batch(pending):
                        break
                    count = len(pending)
                    if conn is None or conn.closed:
                        try:
                            conn = connect(self.path)
                        except StoreError as exc:
                            conn = None
                            if not self._give_up(pending, exc, final=stopping):
                                break
                    if conn is not None and not self._write_postgres(conn, pending, stopping):
                        break  # kept for the next round
                    self._count_handled(count)
                if stopping and not self._rows and not pending:
                    return
        finally:
            if conn is not None:
                conn.close()
            with self._progress:
                self._progress.notify_all()

    def _fill_batch(self, pending: list[dict[str, Any]]) -> bool:
        """Top up an empty ``pending`` with up to ``batch_rows`` queued rows (a batch kept
        from a failed try stays as it is); False when there is nothing to write."""
        if not pending:
            while self._rows and len(pending) < self.batch_rows:
                pending.append(self._rows.popleft())
        return bool(pending)

    def _count_handled(self, count: int) -> None:
        """Count ``count`` rows as handled (written or dropped) and wake ``flush`` waiters."""
        with self._progress:
            self._handled += count
            self._progress.notify_all()

    def _give_up(self, rows: list[dict[str, Any]], exc: Exception, *, final: bool) -> bool:
        """Count one failed try of the pending batch ``rows`` (the server away, a deadlock):
        False, keep them for the next round, for as long as the proxy runs; on the final flush
        the tries follow each other after a short pause until the stop's time is nearly out
        (``close``), then the rows are dropped (``failed_rows``), with every row still queued
        behind them (the queue takes no row once the stop began), in one error line, and True
        returned."""
        now = time.monotonic()
        waiting = len(rows) + len(self._rows)
        if self.failing_since is None:
            self.failing_since = self._warned_at = now
            self._dropped_before = self.dropped_rows
            self._failed_before = self.failed_rows
            logger.warning(
                "request log: writing %s failed (%s); %s queued and tried again every %.1f s "
                "until the server takes %s",
                plural(len(rows), "row"),
                one_line(exc),
                "it stays" if len(rows) == 1 else "they stay",
                self.flush_interval_s,
                "it" if len(rows) == 1 else "them",
            )
        elif now - self._warned_at >= FAILING_WARN_EVERY_S:
            self._warned_at = now
            logger.warning(
                "request log: writes still failing after %.0f s (%s); %s waiting",
                now - self.failing_since,
                one_line(exc),
                plural(waiting, "row"),
            )
        if not final or now < self._stop_deadline:
            if final:
                time.sleep(min(self.flush_interval_s, 0.2))
            return False
        queued = len(self._rows)
        named = [str(r.get("id")) for r in [*rows, *list(self._rows)[:3]][:3]]
        self.failed_rows += len(rows) + queued
        self.last_loss_at = now
        logger.error(
            "request log: %s lost at the stop (ids %s%s): the server did not take them in "
            "%.0f s of tries: %s",
            plural(len(rows) + queued, "row"),
            ", ".join(named),
            "..." if len(rows) + queued > len(named) else "",
            now - self.failing_since,
            one_line(exc),
        )
        rows.clear()
        self._rows.clear()
        self._count_handled(queued)
        return True

    def _written_again(self) -> None:
        """A write succeeded: end a spell of failures, saying how long it lasted."""
        if self.failing_since is not None:
            dropped = self.dropped_rows - self._dropped_before
            refused = self.failed_rows - self._failed_before
            lost = [
                f"{plural(dropped, 'row')} dropped meanwhile (the queue was full)"
                if dropped
                else "",
                f"{plural(refused, 'row')} refused by the server (each logged above with its id)"
                if refused
                else "",
            ]
            logger.warning(
                "request log: writing again after %.0f s of failed writes; %s",
                time.monotonic() - self.failing_since,
                "; ".join(part for part in lost if part) or "no row lost",
            )
            self.failing_since = None

    def _write_postgres(self, conn: Any, rows: list[dict[str, Any]], final: bool) -> bool:
        """Insert ``rows`` in one transaction and clear the list (True), or keep them for a
        later try (False). A lost connection, a deadlock, a serialization failure or a server
        that takes no writes (a hot standby, ``default_transaction_read_only``) is retried
        (``_give_up``; :func:`.store_postgres.server_away`); a batch the server refuses for its
        data is written row by row, so only the rows that fail are lost (``failed_rows``), each
        logged with its id."""
        import psycopg

        from .store_postgres import insert_rows, server_away, storable

        try:
            insert_rows(conn, rows)
        except (psycopg.Error, ValueError, OverflowError) as exc:
            if server_away(exc):
                read_only = isinstance(exc, psycopg.errors.ReadOnlySqlTransaction)
                if not conn.closed and (conn.broken or read_only):
                    conn.close()  # a new session sees a promoted server, a setting undone
                return self._give_up(rows, exc, final=final)
            logger.warning(
                "request log: a batch of %d rows failed (%s); writing them one by one",
                len(rows),
                one_line(exc),
            )
            for row in rows:
                try:
                    insert_rows(conn, [storable(row)])
                except (psycopg.Error, ValueError, OverflowError) as row_exc:
                    self.failed_rows += 1
                    self.last_loss_at = time.monotonic()
                    logger.error(
                        "request log: row %s could not be written: %s",
                        row.get("id"),
                        one_line(row_exc),
                    )
                else:
                    self.written_rows += 1
            rows.clear()
            self._written_again()
            return True
        self.written_rows += len(rows)
        self._written_again()
        rows.clear()
        return True

    def _write(self, db: Database, rows: list[dict[str, Any]], *, final: bool) -> bool:
        """Insert ``rows`` in one transaction and clear the list; False if the file stayed locked.

        A lock held elsewhere longer than ``BUSY_TIMEOUT_S`` leaves the rows pending for the next
        round (retried a few times at once on the final flush). Any other failure (a constraint or
        trigger failing, a full disk, a value SQLite cannot bind) retries the rows one by one, so
        only the rows that fail are lost: each is logged with its id and counted in
        ``failed_rows``. A row whose values cannot be bound as they are (a string with a lone
        surrogate, which is valid JSON but not UTF-8; an integer beyond 64 bits) is stored with
        those values made storable (``_storable``) rather than lost.
        """
        attempts = 0
        failure: Exception
        while True:
            try:
                _write_batch(db, rows, self._rollups)
            except sqlite3.OperationalError as exc:
                failure = exc
                if "locked" not in str(exc) and "busy" not in str(exc):
                    break
                attempts += 1
                logger.warning("request log is locked by another writer (%s); retrying", exc)
                if final and attempts < 4:
                    continue
                if not final:
                    return False
                break
            except (sqlite3.Error, ValueError, OverflowError) as exc:
                failure = exc
                break
            else:
                self.written_rows += len(rows)
                rows.clear()
                return True
        logger.warning(
            "request log: a batch of %d rows failed (%s); writing them one by one",
            len(rows),
            failure,
        )
        for row in rows:
            try:
                try:
                    _write_batch(db, [row], self._rollups)
                except (ValueError, OverflowError) as exc:
                    logger.warning(
                        "request log: row %s has values SQLite cannot store as they are (%s); "
                        "storing them escaped",
                        row.get("id"),
                        exc,
                    )
                    _write_batch(db, [_storable(row)], self._rollups)
            except (sqlite3.Error, ValueError, OverflowError) as exc:
                self.failed_rows += 1
                self.last_loss_at = time.monotonic()
                logger.error("request log: row %s could not be written: %s", row.get("id"), exc)
            else:
                self.written_rows += 1
        rows.clear()
        return True


def _storable(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with every value SQLite can bind: text that is not valid UTF-8 (lone surrogates,
    which ``json.loads`` accepts) gets backslash escapes (``\\ud800``), and integers outside
    SQLite's signed 64-bit range are bound as their decimal text (which an INTEGER column
    stores as REAL)."""
    fixed: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, str):
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        elif isinstance(value, int) and not -(2**63) <= value < 2**63:
            value = str(value)
        fixed[key] = value
    return fixed


def _null(value: None) -> None:
    """sqlite3's adapter of ``None``: returns it, which sqlite3 binds as NULL."""
    return None


# sqlite3 binds int, float, str and bytearray as they are and looks any other value up in its
# adapters; for None, with none registered, it then asks the protocol type for ``__adapt__``,
# whose AttributeError is formatted and cleared: about 1,800 instructions for each of a row's
# 25 to 30 NULL columns, 4% of the writer's. With this adapter it is a dictionary hit and one
# call, and None is still bound as NULL (process-wide, as every sqlite3 adapter is).
sqlite3.register_adapter(type(None), _null)

#: Rows per multi-row INSERT statement (fewer if SQLite allows fewer bound variables).
ROWS_PER_STATEMENT = 64


def _insert(db: Database, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (same keys, in the same order) in one transaction, each row through the
    connection's rollup triggers."""
    with db.conn:
        _insert_rows(db.conn, rows)


#: Rows from which a batch goes in through the writer's batch statements: each batch pays
#: for the statements about what 3.5 rows save on the triggers (callgrind, 600 logged rows
#: inserted again: 960k instructions a batch + 313k a row, against 553k + 430k).
BATCH_STATEMENT_MIN_ROWS = 4


def _write_batch(db: Database, rows: list[dict[str, Any]], writer: TakeOver | None) -> None:
    """The writer's insert of ``rows`` (same keys, in the same order), in one transaction:
    on ``writer``'s connection, its row triggers off, with its batch statements, which add the
    rows to the rollups (:mod:`.writer_rollups`); or, for fewer than
    ``BATCH_STATEMENT_MIN_ROWS`` rows or without ``writer``, on ``db`` through the triggers."""
    if (
        writer is None
        or writer.database is None
        or not writer.statements
        or len(rows) < BATCH_STATEMENT_MIN_ROWS
    ):
        _insert(db, rows)
        return
    conn = writer.database.conn
    # IMMEDIATE: the file's write lock first, so that no other writer's rows come between the
    # largest rowid read here and this batch's
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA schema_version").fetchone()[0] != writer.schema_version:
            conn.rollback()
            writer.renew(conn)  # another connection changed the schema: its triggers may differ
            _write_batch(db, rows, writer)
            return
        bounds = {"lo": conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM requests").fetchone()[0]}
        _insert_rows(conn, rows)
        for statement in writer.statements:
            conn.execute(statement, bounds)
        conn.commit()
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def _insert_rows(conn: sqlite3.Connection, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (same keys, in the same order) in the open transaction of ``conn``.

    The rows go in as multi-row ``INSERT ... VALUES (...), (...)`` statements of 64, 16, 4 or 1
    rows (four SQL texts, all kept prepared by sqlite3's statement cache). sqlite3 lets go of the
    GIL around each statement step and must take it back afterwards; with ``executemany`` that
    happened once per row, and each hand-back stole the GIL from the busy event loop thread. At 32
    concurrent requests the writer then cost the proxy about 0.16 ms of CPU per request and 16%
    of its throughput; in statements of 64 rows it costs about 0.06 ms and 6%
    (``benchmarks/proxy_overhead.py``, docs/benchmarks.md). Values are bound as they are (no
    text round trip).
    """
    columns = list(rows[0])
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    per_statement = max(1, min(ROWS_PER_STATEMENT, limit // len(columns)))
    head = f"INSERT INTO requests ({', '.join(columns)}) VALUES "
    one = f"({', '.join('?' * len(columns))})"
    values = _row_values(columns, rows)
    width = len(columns)
    start = 0
    while start < len(rows):
        count = per_statement
        while count > len(rows) - start:
            count = max(1, count // 4)
        conn.execute(
            head + ", ".join([one] * count), values[start * width : (start + count) * width]
        )
        start += count


def _row_values(columns: list[str], rows: list[dict[str, Any]]) -> list[Any]:
    """The values of ``rows`` in ``columns`` order, row after row (None for a missing key),
    read by one ``itemgetter`` call a row where every row has every column."""
    if len(columns) == 1:
        return [row.get(columns[0]) for row in rows]
    values: list[Any] = []
    read = operator.itemgetter(*columns)
    try:
        for row in rows:
            values += read(row)
    except KeyError:
        return [row.get(c) for row in rows for c in columns]
    return values
