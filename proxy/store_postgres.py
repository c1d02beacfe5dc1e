"""The request log in Postgres: connections that speak the log's SQLite SQL, and the batch insert.

A ``--db postgresql://user@host/dbname`` log holds the same tables as a SQLite log, created by
the same migrations (:data:`.store.MIGRATIONS`) and read by the same report SQL. Two adapters
make that so, both over `psycopg 3 <https://www.psycopg.org/psycopg3/docs/>`_ (checked
2026-12-03):

- :class:`PgConnection`, the subset of ``sqlite3.Connection`` the log's code calls
  (``execute`` with ``:name``/``?`` parameters, ``commit``, ``close``): each statement goes
  through :func:`.dialect.to_postgres` first;
- :class:`PgDatabase`, the subset of ``sqlite_utils.Database`` the migrations call
  (``execute``, ``table(name).columns_dict / create / add_column / create_index / insert``).

Postgres' ``SUM`` of a ``BIGINT`` is a ``NUMERIC``; these connections load ``NUMERIC`` values as
``int`` when whole and ``float`` otherwise, which is what SQLite returns for the same sums.

:func:`insert_rows` writes a batch of ``requests`` rows with one ``COPY`` statement, so the
rollup triggers (statement-level, :mod:`.rollup_postgres`) run once per batch.

Raises everywhere: ``psycopg.Error`` subclasses; :class:`PgConnection` turns them into
:class:`promptcache.errors.StoreError` for readers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from promptcache.errors import ConfigError, StoreError

try:
    import psycopg
    from psycopg.adapt import Loader
except ImportError as exc:  # the optional extra
    raise ConfigError(
        "a postgresql:// log needs psycopg, which this install lacks: install "
        "promptcache[postgres] (in a clone of its repository: pip install '.[postgres]')"
    ) from exc

from .dialect import to_postgres
from .redact import redact_url

__all__ = [
    "PgConnection",
    "PgDatabase",
    "PgTable",
    "connect",
    "insert_rows",
    "redact_url",
    "require_log",
    "server_away",
    "storable",
]

#: Seconds a connection attempt waits for the server.
CONNECT_TIMEOUT_S = 10


def server_away(exc: BaseException) -> bool:
    """Whether a failed write failed for the server's state, not for its rows: the connection
    (lost, refused, the server restarting, a deadlock: ``OperationalError``,
    ``InterfaceError``), or a server that takes no writes now (SQLSTATE 25006
    ``read_only_sql_transaction``: a hot standby, a failover not promoted yet,
    ``default_transaction_read_only``), whose session must be opened again to write. Rows
    kept for such a failure are written once the server takes them."""
    return isinstance(
        exc,
        psycopg.OperationalError | psycopg.InterfaceError | psycopg.errors.ReadOnlySqlTransaction,
    )


class _NumericLoader(Loader):
    """``NUMERIC`` text -> ``int`` when whole, else ``float`` (SQLite's types for the sums)."""

    def load(self, data: Any) -> int | float:
        text = bytes(data).decode()
        if "." in text or "e" in text.lower() or "n" in text.lower():
            value = float(text)
            return int(value) if value.is_integer() and abs(value) < 2**53 else value
        return int(text)


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A psycopg connection to ``url`` whose ``NUMERIC`` results load as int/float.

    Raises:
        StoreError: the server cannot be reached or refuses the login (one line, password
            masked).
    """
    try:
        conn = psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        for secret in _passwords_in(url):  # libpq quotes a malformed one in its message
            # the password as a whole word, not inside one ('p' is no part of 'port')
            reason = re.sub(rf"(?<![\w%]){re.escape(secret)}(?![\w%])", "***", reason)
        if "invalid percent-encoded token" in reason:
            reason += "; write a % in the user name or password as %25"
        raise StoreError(f"cannot connect to the request log {redact_url(url)}: {reason}") from exc
    conn.adapters.register_loader("numeric", _NumericLoader)
    return conn


def _passwords_in(url: str) -> list[str]:
    """The password of ``url`` as written and percent-decoded (longest first), if it has one."""
    userinfo = url.partition("://")[2].partition("?")[0].rpartition("@")[0]
    password = userinfo.partition(":")[2]
    if not password:
        return []
    return sorted({password, unquote(password)} - {""}, key=len, reverse=True)


class _Cursor:
    """The rows of one statement, as ``sqlite3.Cursor`` hands them out."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor
        self.description = cursor.description
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        return self._cursor.fetchone() if self.description else None

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall() if self.description else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


#: ``IS :name`` in SQLite SQL (see :meth:`PgConnection.execute`).
_IS_PARAM = re.compile(r"\bIS :([A-Za-z_]\w*)")


class PgConnection:
    """A Postgres connection that runs the log's SQLite SQL (see the module docstring).

    Args:
        url: ``postgresql://...``.
        read_only: one read-only ``REPEATABLE READ`` transaction for the connection's life, so
            every query of a report sees the same snapshot; else statements run in transactions
            ended by ``commit()``.
        conn: an open psycopg connection to wrap instead of connecting.

    Raises:
        StoreError: the server cannot be reached, or a statement fails (its message).
    """

    dialect = "postgres"

    def __init__(
        self, url: str, *, read_only: bool = False, conn: psycopg.Connection[Any] | None = None
    ) -> None:
        self.url = url
        self.raw = conn if conn is not None else connect(url)
        if read_only:
            self.raw.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            self.raw.read_only = True

    def execute(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> _Cursor:
        """Run one SQLite-dialect statement (translated) and return its rows.

        ``x IS :name`` becomes ``x = :name``, or ``x IS NULL`` when that parameter is None:
        what SQLite's ``IS`` means, in a form Postgres can read through an index
        (``IS NOT DISTINCT FROM`` never uses one)."""
        if isinstance(params, Mapping) and " IS :" in sql:
            sql = _IS_PARAM.sub(
                lambda m: "IS NULL" if params.get(m.group(1)) is None else f"= :{m.group(1)}", sql
            )
        cursor = self.raw.cursor()
        try:
            cursor.execute(to_postgres(sql), params if params is not None else ())
        except psycopg.Error as exc:
            # the server's first line, as it wrote it (no repr quotes); the class without one
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise StoreError(
                f"the request log {redact_url(self.url)} refused a statement: {reason}"
            ) from exc
        return _Cursor(cursor)

    def execute_native(self, sql: str) -> None:
        """Run Postgres SQL as it is (no translation, no parameters): trigger functions."""
        self.raw.execute(sql.encode())

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def commit(self) -> None:
        self.raw.commit()

    def rollback(self) -> None:
        self.raw.rollback()

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> PgConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TYPES = {str: "TEXT", float: "DOUBLE PRECISION", int: "BIGINT"}


class PgTable:
    """The part of ``sqlite_utils.Table`` the migrations use, on Postgres."""

    def __init__(self, db: PgDatabase, name: str) -> None:
        self.db = db
        self.name = name

    @property
    def columns_dict(self) -> dict[str, str]:
        """Column name -> Postgres type name, in table order (empty if there is no table)."""
        rows = self.db.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
            (self.name,),
        ).fetchall()
        return {str(name): str(kind) for name, kind in rows}

    def create(
        self,
        columns: Mapping[str, type],
        *,
        pk: str | None = None,
        not_null: set[str] | None = None,
    ) -> None:
        defs = []
        for name, kind in columns.items():
            text = f"{name} {_TYPES[kind]}"
            if name == pk:
                text += " PRIMARY KEY"
            elif not_null and name in not_null:
                text += " NOT NULL"
            defs.append(text)
        self.db.conn.execute_native(f"CREATE TABLE {self.name} ({', '.join(defs)})")

    def add_column(self, name: str, kind: type) -> None:
        self.db.conn.execute_native(f"ALTER TABLE {self.name} ADD COLUMN {name} {_TYPES[kind]}")

    def create_index(self, columns: Sequence[str], *, index_name: str) -> None:
        self.db.execute(
            f"CREATE INDEX IF NOT EXISTS {index_name} ON {self.name} ({', '.join(columns)})"
        )

    def insert(self, row: Mapping[str, Any]) -> None:
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.db.execute(f"INSERT INTO {self.name} ({names}) VALUES ({marks})", list(row.values()))


class PgDatabase:
    """The part of ``sqlite_utils.Database`` the migrations use, on Postgres: ``execute``
    (SQLite SQL, translated), ``table(name)``, ``conn`` (a :class:`PgConnection`), ``close``."""

    dialect = "postgres"

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> _Cursor:
        return self.conn.execute(sql, params)

    def table(self, name: str) -> PgTable:
        return PgTable(self, name)

    def close(self) -> None:
        self.conn.close()


def storable(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with every value Postgres can store: NUL characters (which JSON allows in text
    but Postgres' ``TEXT`` does not) written as ``\\u0000``, text that is not valid UTF-8
    backslash-escaped, integers beyond 64 bits as decimal text."""
    fixed: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, str):
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
            value = value.replace("\x00", "\\u0000")
        elif isinstance(value, bool):
            value = int(value)
        elif isinstance(value, int) and not -(2**63) <= value < 2**63:
            value = str(value)
        fixed[key] = value
    return fixed


def insert_rows(conn: psycopg.Connection[Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) into ``requests`` with one ``COPY`` in one
    transaction (committed here; rolled back if anything fails).

    Raises:
        psycopg.Error: the server refused the batch (nothing of it is stored).
    """
    if not rows:
        return
    columns = list(rows[0])
    try:
        with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY requests ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(
                    [int(v) if isinstance(v, bool) else v for v in (row.get(c) for c in columns)]
                )
        conn.commit()
    except BaseException:
        if not conn.closed:
            conn.rollback()
        raise


def require_log(conn: PgConnection) -> int:
    """The log's schema version: 0 when the database holds no promptcache log (no ``requests``
    or no ``schema_version`` table in the current schema)."""
    # the catalog, not information_schema.tables, which lists only the tables the role has a
    # privilege on: a role that may not read the log would be told there is none
    row = conn.execute(
        "SELECT COUNT(*) FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
        " AND c.relname IN ('requests', 'schema_version')"
    ).fetchone()
    if int(row[0]) < 2:
        return 0
    try:
        version = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
    except StoreError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            raise
        conn.rollback()
        user, schema = conn.execute("SELECT current_user, current_schema()").fetchone()
        raise StoreError(
            f"{redact_url(conn.url)} holds a promptcache log that role {user} may not read "
            f"({exc.__cause__}); grant it SELECT on the log's tables (GRANT SELECT ON ALL "
            f"TABLES IN SCHEMA {schema} TO {user}), or give the URL of a role that may"
        ) from None
    return int(version[0])
