"""``promptcache log copy SRC DST``: move a request log into another backend (SQLite into the
Postgres log a fleet shares, or any backend into any), once.

Every ``requests`` row of SRC goes into DST in one transaction, oldest first, except that a
request's predecessor (``previous_request_id``) always goes in before it: a predecessor can have
arrived later than the request that names it (it answered sooner, under concurrency), and DST's
rollup triggers read the predecessor when the request goes in (the tokens a break lost, the
read-back credit), as SRC's did when the proxy logged the two in that order. DST's rollups are
kept by its own triggers, so its report over the copied rows equals SRC's. The
request bodies kept by ``--store-prefixes`` (``prefix_bodies``, one per prefix family) follow
in the same transaction, the latest body of a family winning as when a proxy writes them.

A log's identity is its random ``key_salt`` (``proxy_settings``, made when the log is created).
The copy records ``copied_from:<SRC's salt>`` in DST's ``proxy_settings`` in the same
transaction as the rows, and a second copy of the same SRC into DST is refused (a copy that
failed midway left nothing, and can be run again). When DST has no requests yet it also takes
SRC's salt, so the key fingerprints of rows the proxies write afterwards match the copied
ones (proxies already running on DST keep the salt they read when they started).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptcache.errors import ConfigError, StoreError
from promptcache.formatting import plural

from .dialect import is_postgres_url
from .prefix_store import PREFIX_COLUMNS, PREFIX_TABLE, PREFIX_UPSERT
from .store import SCHEMA_VERSION, open_log

__all__ = ["COPY_MARKER", "CopyResult", "copy_log", "log_identity"]

#: ``proxy_settings`` key prefix of the copy marker; the source's salt follows.
COPY_MARKER = "copied_from:"
#: Rows read from the source per fetch.
CHUNK_ROWS = 5000


@dataclass(frozen=True)
class CopyResult:
    """What one copy did."""

    source: str
    destination: str
    rows: int
    #: SRC's identity (its key salt), recorded in DST as ``copied_from:<identity>``
    identity: str
    #: DST took SRC's key salt (it had no requests)
    adopted_salt: bool
    #: stored prefix bodies (``prefix_bodies``) written into DST: SRC's, less those of a
    #: family whose body in DST is more recent
    prefix_bodies: int = 0


def _shown(location: str | Path) -> str:
    from .redact import redact_url

    return redact_url(str(location))


def log_identity(db: Any) -> str:
    """A log's identity: its ``key_salt`` (hex), read through ``db.execute``."""
    row = db.execute("SELECT value FROM proxy_settings WHERE key = 'key_salt'").fetchone()
    if row is None:
        raise ConfigError("the log has no key_salt in proxy_settings: not a promptcache log")
    return str(row[0])


def _requests_in_order(src: str | Path, columns: list[str]) -> Iterator[tuple[Any, ...]]:
    """SRC's ``requests`` (``columns``) by ``started_at, id``, streamed, each predecessor
    before the requests that name it: a request whose predecessor sorts after it, or is itself
    held back, is held until the predecessor has gone (only those are kept in memory; the
    predecessor is looked up through the primary key)."""
    names = ", ".join(f"r.{c}" for c in columns)
    later = (
        "LEFT JOIN requests AS p ON p.id = r.previous_request_id AND (p.started_at > r.started_at"
        " OR (p.started_at = r.started_at AND p.id > r.id))"
    )
    query = f"SELECT {names}, p.id FROM requests AS r {later} ORDER BY r.started_at, r.id"
    at, previous_at = columns.index("id"), columns.index("previous_request_id")
    waiting: dict[str, list[tuple[Any, ...]]] = {}  # predecessor id -> requests held for it
    held: set[str] = set()
    for *values, sorts_later in _source_rows(src, query):
        row = tuple(values)
        if sorts_later is not None or row[previous_at] in held:
            waiting.setdefault(str(row[previous_at]), []).append(row)
            held.add(str(row[at]))
            continue
        ready = [row]
        while ready:
            done = ready.pop()
            held.discard(str(done[at]))
            yield done
            ready.extend(reversed(waiting.pop(str(done[at]), [])))
    for rows in waiting.values():  # not reached: a waited-for predecessor is in SRC
        yield from rows


def _source_rows(src: str | Path, query: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query`` over SRC, streamed."""
    if is_postgres_url(src):
        from .store_postgres import connect

        conn = connect(str(src))
        try:
            with conn.cursor(name="promptcache_log_copy") as cursor:
                cursor.execute(query.encode())
                while batch := cursor.fetchmany(CHUNK_ROWS):
                    yield from batch
        finally:
            conn.close()
        return
    conn_lite = sqlite3.connect(_read_only_uri(src), uri=True)
    try:
        cursor_lite = conn_lite.execute(query)
        while batch_lite := cursor_lite.fetchmany(CHUNK_ROWS):
            yield from batch_lite
    finally:
        conn_lite.close()


def _read_only_uri(src: str | Path) -> str:
    """A read-only SQLite URI of the log file ``src``. In a folder this process cannot write
    (a read-only mount, another user's directory) SQLite cannot create the ``-shm`` file a
    WAL-mode log's reader needs, so the file is read as it is on disk
    (https://www.sqlite.org/uri.html#uriimmutable, checked 2026-12-03)."""
    path = Path(src).resolve()
    uri = f"{path.as_uri()}?mode=ro"
    return uri if os.access(path.parent, os.W_OK) else f"{uri}&immutable=1"


def _check_source(src: str | Path) -> tuple[str, list[str]]:
    """SRC's identity and ``requests`` columns (SRC migrated first, as ``report`` does).

    Raises:
        ConfigError: SRC is missing or not a promptcache log, or is a log of an older schema
            where it cannot be upgraded in place (no write access to it or its folder).
    """
    if not is_postgres_url(src) and not Path(src).is_file():
        raise ConfigError(f"no log at {src}: give the path of an existing log as SRC")
    if is_postgres_url(src):
        from .store_postgres import PgConnection, require_log

        probe_pg = PgConnection(str(src))
        try:
            has_log = require_log(probe_pg) > 0
        finally:
            probe_pg.close()
        if not has_log:  # nothing is written into a database that holds no log
            raise ConfigError(
                f"{_shown(src)} holds no promptcache log: give as SRC a database a proxy "
                "writes to (promptcache proxy --db URL)"
            )
    else:
        with closing(sqlite3.connect(_read_only_uri(src), uri=True)) as probe:
            try:
                probe.execute("SELECT 1 FROM requests LIMIT 1").fetchall()
            except sqlite3.DatabaseError as exc:
                if "locked" in str(exc) or "busy" in str(exc):  # another connection's lock
                    raise ConfigError(
                        f"{src} is locked by another connection ({exc}): end the transaction "
                        "that holds it, then copy again"
                    ) from exc
                raise ConfigError(f"{src} is not a promptcache log ({exc})") from exc
            version: int | None
            try:
                version = probe.execute(
                    "SELECT COALESCE(MAX(version), 0) FROM schema_version"
                ).fetchone()[0]
            except sqlite3.DatabaseError:  # another program's table: open_log says so
                version = None
            if version == SCHEMA_VERSION:  # nothing to migrate: read it as it is
                identity = log_identity(probe)
                cursor = probe.execute("SELECT * FROM requests LIMIT 0")
                return identity, [str(column[0]) for column in cursor.description]
        path = Path(src)
        if (
            version is not None
            and version < SCHEMA_VERSION
            and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
        ):
            raise ConfigError(
                f"{src} is a log of an older promptcache (schema {version}); log copy upgrades "
                "SRC in place first, which needs write access to it and its folder: copy the "
                "file somewhere writable and pass that copy as SRC"
            )
    db = open_log(src)
    try:
        identity = log_identity(db)
        cursor = db.execute("SELECT * FROM requests LIMIT 0")
        columns = [str(column[0]) for column in cursor.description]
    finally:
        db.close()
    return identity, columns


def copy_log(src: str | Path, dst: str | Path) -> CopyResult:
    """Copy every request of log ``src`` into log ``dst`` (created if missing), once.

    Args:
        src, dst: SQLite files or ``postgresql://`` URLs.

    Raises:
        ConfigError: SRC is missing or not a log; SRC and DST are the same log; DST already
            holds a copy of SRC's log (SRC, or the log whose key salt SRC took in a copy: the
            message names what was copied, when and how many rows), or a request of SRC by its
            id (the message names it); nothing is written then.
        StoreError: either database cannot be opened, or the copy failed (DST unchanged).
    """
    if _same_location(src, dst):
        raise ConfigError(
            f"SRC {_shown(src)} and DST {_shown(dst)} name one database; give two different logs"
        )
    identity, columns = _check_source(src)
    dst_db = open_log(dst)
    try:
        if log_identity(dst_db) == identity and not _marker(dst_db, identity):
            raise ConfigError(f"{_shown(src)} and {_shown(dst)} are the same log; nothing to copy")
        done = _marker(dst_db, identity)
        if done is not None:
            copied = plural(int(done.get("rows") or 0), "row")
            if done.get("source") in (None, _shown(src)):
                raise ConfigError(
                    f"{_shown(dst)} already holds a copy of {_shown(src)} (log {identity[:8]}): "
                    f"{copied} copied at {done.get('copied_at_utc')}; a log is copied once"
                )
            # SRC took the key salt of that log from a copy (a copy of a copy, a copy back)
            raise ConfigError(
                f"{_shown(dst)} already holds a copy of log {identity[:8]}: {copied} copied "
                f"from {done['source']} at {done.get('copied_at_utc')}; {_shown(src)} is that "
                "log or a copy of it (the same key salt), and a log is copied once"
            )
        have = set(_columns(dst_db))
        missing = [c for c in columns if c not in have]
        if missing:
            raise ConfigError(
                f"{_shown(dst)} lacks columns {missing} that {_shown(src)} has: upgrade "
                "promptcache where DST is written"
            )
        empty = dst_db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0
        rows = _requests_in_order(src, columns)
        try:
            count = (
                _copy_postgres(dst_db, columns, rows)
                if is_postgres_url(dst)
                else _copy_sqlite(dst_db, columns, rows)
            )
        except _DuplicateRequest as exc:
            raise ConfigError(
                f"{_shown(dst)} already holds request {exc.request_id} of {_shown(src)}: the "
                "two logs share requests, and a request is copied once; nothing was copied"
            ) from None
        bodies = _copy_prefix_bodies(dst_db, src)
        marker = {
            "source": _shown(src),
            "rows": count,
            "copied_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        dst_db.execute(
            "INSERT INTO proxy_settings (key, value) VALUES (?, ?)",
            (COPY_MARKER + identity, json.dumps(marker)),
        )
        if empty:
            dst_db.execute(
                "UPDATE proxy_settings SET value = ? WHERE key = 'key_salt'", (identity,)
            )
        dst_db.conn.commit()
    except BaseException:
        if dst_db.conn.in_transaction:
            dst_db.conn.rollback()
        raise
    finally:
        dst_db.close()
    return CopyResult(str(src), str(dst), count, identity, empty, bodies)


def _copy_prefix_bodies(db: Any, src: str | Path) -> int:
    """Upsert SRC's ``prefix_bodies`` into DST's open transaction (a family's latest body
    wins); returns the rows written."""
    written = 0
    query = f"SELECT {', '.join(PREFIX_COLUMNS)} FROM {PREFIX_TABLE} ORDER BY started_at"
    for row in _source_rows(src, query):
        # Postgres text cannot hold NUL: stored as its JSON escape, as the requests' COPY does
        values = [v.replace("\x00", "\\u0000") if isinstance(v, str) else v for v in row]
        written += max(db.execute(PREFIX_UPSERT, values).rowcount, 0)
    return written


def _marker(db: Any, identity: str) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT value FROM proxy_settings WHERE key = ?", (COPY_MARKER + identity,)
    ).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def _columns(db: Any) -> list[str]:
    return [str(c[0]) for c in db.execute("SELECT * FROM requests LIMIT 0").description]


def _copy_sqlite(db: Any, columns: list[str], rows: Iterator[tuple[Any, ...]]) -> int:
    """Insert ``rows`` into a SQLite DST inside one transaction (left open for the marker)."""
    conn: sqlite3.Connection = db.conn
    conn.execute("BEGIN IMMEDIATE")
    sql = f"INSERT INTO requests ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    at = columns.index("id")
    count = 0
    try:
        while chunk := [row for _, row in zip(range(CHUNK_ROWS), rows, strict=False)]:
            conn.execute("SAVEPOINT chunk")
            try:
                conn.executemany(sql, chunk)
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK TO chunk")  # the chunk's rows inserted before it
                lookup = "SELECT 1 FROM requests WHERE id = ?"
                for row in chunk:
                    if conn.execute(lookup, (row[at],)).fetchone() is not None:
                        raise _DuplicateRequest(str(row[at])) from None
                raise
            conn.execute("RELEASE chunk")
            count += len(chunk)
    except sqlite3.Error as exc:
        raise StoreError(f"copy failed, the destination is unchanged: {exc}") from exc
    return count


def _copy_postgres(db: Any, columns: list[str], rows: Iterator[tuple[Any, ...]]) -> int:
    """One ``COPY`` of ``rows`` into a Postgres DST, in its open transaction (left open)."""
    import psycopg

    count = 0
    try:
        with (
            db.conn.raw.cursor() as cursor,
            cursor.copy(f"COPY requests ({', '.join(columns)}) FROM STDIN".encode()) as copy,
        ):
            for row in rows:
                # Postgres text cannot hold NUL (JSON bodies may): stored as its JSON escape
                copy.write_row(
                    [v.replace("\x00", "\\u0000") if isinstance(v, str) else v for v in row]
                )
                count += 1
    except psycopg.errors.UniqueViolation as exc:
        # the detail reads: Key (id)=(<id>) already exists.
        detail = exc.diag.message_detail or ""
        key = detail.partition("=(")[2].rpartition(") already exists")[0]
        raise _DuplicateRequest(key or "(id not reported)") from None
    except psycopg.Error as exc:
        reason = exc.diag.message_primary or str(exc).strip().splitlines()[0]
        raise StoreError(f"copy failed, the destination is unchanged: {reason}") from exc
    return count


class _DuplicateRequest(Exception):
    """A row of SRC has the id of a request DST already holds (``request_id``)."""

    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


def _same_location(src: str | Path, dst: str | Path) -> bool:
    """Whether SRC and DST name one database: the same file, or the same URL."""
    if is_postgres_url(src) or is_postgres_url(dst):
        return str(src) == str(dst)
    try:
        return Path(src).resolve() == Path(dst).resolve() or Path(src).samefile(dst)
    except OSError:  # DST does not exist yet
        return False
