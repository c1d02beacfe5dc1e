"""The proxy's log writer adds each batch to the report rollups with one statement a rollup,
instead of the row triggers that every other writer of a SQLite log runs.

A SQLite log keeps its report rollups with ``FOR EACH ROW`` triggers (:mod:`.rollup`,
:mod:`.replica_rollup`, :mod:`.ttft_rollup`, :mod:`.gap_rollup`), so that any program that
inserts rows (a ``sqlite3`` shell, ``promptcache`` copying a log) keeps them right. Run once a
row, they cost the proxy's writer thread more than the insert itself. So the writer's own
connection turns the log's triggers off for itself (:func:`take_over`: SQLite's
``SQLITE_DBCONFIG_ENABLE_TRIGGER``, a setting of one connection; the file, its schema and every
other connection keep them) and, in the transaction of each batch, adds the batch's rows to
``report_hourly`` (its own sums and the read-back credit), ``report_breaks_hourly``,
``report_family_hourly``, ``report_replica_hourly`` and ``report_ttft_hourly`` with one
statement each (:func:`batch_statements`). Any other insert trigger on ``requests`` (the
5-minute gap rollup, whose change depends on the rows already in the family's hour; one a
user added) is copied as a ``TEMP`` trigger of the writer's connection, which still runs per
row (SQLite 3.35 and later keep ``TEMP`` triggers on when the setting is off).

The statements add what the triggers would have added, row for row:

- ``report_hourly``'s own sums go in one row at a time, in the order the rows were inserted
  (an ``INSERT ... SELECT ... ORDER BY rowid ... ON CONFLICT DO UPDATE``), so its sums of REAL
  values (cost, hit ratio) are added in the triggers' order, to the same bits;
- the other rollups hold integer sums, a MIN and a MAX, which do not depend on the order: the
  batch's rows are summed per rollup key first (the Postgres statement triggers'
  :mod:`.rollup_postgres` way), then added with one upsert per key;
- the read-back credit and the tokens a break lost read the request's predecessor
  (``previous_request_id``), which the writer's first-in, first-out queue has always inserted
  before the request, in an earlier batch or earlier in the same one.

Where the setting cannot be changed (SQLite before 3.35, or a Python whose ``sqlite3`` gives
no way to it: see :func:`_triggers_off`), the writer inserts through the triggers as every
other writer does. Postgres logs keep their statement triggers (:mod:`.rollup_postgres`),
which already run once a batch.
"""

from __future__ import annotations

import ctypes
import logging
import sqlite3
import sys
from typing import Final

from sqlite_utils import Database

from .replica_rollup import REPLICA_SUMS, replica_rows
from .rollup import (
    _BREAK_TRIGGER,
    _FAMILY_KEY_COLUMN,
    _FAMILY_TRIGGER,
    _HOURLY_KEY,
    _HOURLY_KEY_PARTS,
    _HOURLY_VALUES,
    _READ_BACK_VALUES,
    _READS_PREDECESSOR,
    _hourly_upsert,
    break_rows,
    family_rows,
)
from .ttft_rollup import _TRIGGER as _TTFT_TRIGGER
from .ttft_rollup import TTFT_TABLE, ttft_rows

__all__ = ["TakeOver", "batch_statements", "take_over"]

logger = logging.getLogger("promptcache.proxy.store")

#: The batch's rows, as a ``where`` over ``requests AS r`` (``:lo``: the largest rowid before).
_BATCH: Final = "r.rowid > :lo"


def _hourly() -> str:
    key = _HOURLY_KEY.format(r="r")
    return _hourly_upsert(
        f"SELECT {key}, {_HOURLY_VALUES.format(r='r')} FROM requests AS r"
        f" WHERE {_BATCH} ORDER BY r.rowid"
    )


def _read_back() -> str:
    keys = [name for name, _ in _HOURLY_KEY_PARTS]
    match = " AND ".join(f"report_hourly.{k} = rb.{k}" for k in keys)
    return f"""UPDATE report_hourly SET
          read_back_requests = read_back_requests + rb.n,
          read_back_5m_tokens = read_back_5m_tokens + rb.w5,
          read_back_1h_tokens = read_back_1h_tokens + rb.w1,
          read_back_unknown_tokens = read_back_unknown_tokens + rb.wu
        FROM (SELECT {", ".join(keys)},
                SUM(CASE WHEN w5 + w1 + wu > 0 THEN 1 ELSE 0 END) AS n,
                SUM(w5) AS w5, SUM(w1) AS w1, SUM(wu) AS wu
              FROM (SELECT {_HOURLY_KEY.format(r="p")}, {_READ_BACK_VALUES.format(r="r")}
                    FROM requests AS r JOIN requests AS p ON p.id = r.previous_request_id
                    WHERE {_BATCH} AND {_READS_PREDECESSOR.format(r="r")}) AS x
              GROUP BY {", ".join(keys)}) AS rb
        WHERE {match}"""


def _summed(
    table: str,
    keys: tuple[str, ...],
    values: tuple[str, ...],
    rows: str,
    *,
    aggregate: dict[str, str] | None = None,
    update: dict[str, str] | None = None,
) -> str:
    """Sum ``rows`` (columns ``keys`` then ``values``, by name) per key and add the sums into
    ``table``; ``aggregate`` names another aggregate than SUM for a column, ``update`` another
    merge than ``old + new``."""
    aggregate = aggregate or {}
    update = update or {}
    key_list = ", ".join(keys)
    sums = ", ".join(f"{aggregate.get(v, 'SUM')}({v})" for v in values)
    sets = ", ".join(f"{v} = {update.get(v, f'{v} + excluded.{v}')}" for v in values)
    return f"""INSERT INTO {table} ({key_list}, {", ".join(values)})
        SELECT {key_list}, {sums} FROM ({rows}) WHERE true GROUP BY {key_list}
        ON CONFLICT ({key_list}) DO UPDATE SET {sets}"""


def _breaks() -> str:
    return _summed(
        "report_breaks_hourly",
        ("hour", "reason", "model", "segment"),
        ("breaks", "tokens_lost", "tokens_lost_write_5m", "tokens_lost_write_1h"),
        break_rows(_BATCH),
    )


_FAMILY_SUMS: Final = ("vendor", "requests", "input_tokens", "cache_write_5m_tokens",
                        "cache_write_1h_tokens", "cached_prefix_tokens", "cached_requests",
                        "min_prefix_tokens")  # fmt: skip


def _family() -> str:
    name = _FAMILY_KEY_COLUMN
    return _summed(
        "report_family_hourly",
        ("hour", "key_fingerprint", "model", name),
        _FAMILY_SUMS,
        family_rows(_BATCH, "requests", name),
        aggregate={"vendor": "MAX", "min_prefix_tokens": "MIN"},
        update={
            "vendor": "MAX(vendor, excluded.vendor)",
            "min_prefix_tokens": "MIN(COALESCE(min_prefix_tokens, excluded.min_prefix_tokens),"
            " COALESCE(excluded.min_prefix_tokens, min_prefix_tokens))",
        },
    )


def _replica() -> str:
    return _summed(
        "report_replica_hourly",
        ("hour", "upstream", "replica"),
        tuple(name for name, _ in REPLICA_SUMS),
        replica_rows(_BATCH, "requests", REPLICA_SUMS),
    )


def _ttft() -> str:
    return _summed(TTFT_TABLE, ("hour", "hit", "bucket"), ("requests",), ttft_rows(_BATCH))


#: Each deferred insert trigger and the statement that does its work for a batch, in the order
#: they run (the read-back credit updates rows the hourly statement may create).
_STATEMENTS: Final = {
    "report_rollup_insert": _hourly,
    "report_rollup_read_back": _read_back,
    _BREAK_TRIGGER: _breaks,
    _FAMILY_TRIGGER: _family,
    "report_rollup_replica": _replica,
    _TTFT_TRIGGER: _ttft,
}


#: ``sqlite3.h``: SQLITE_DBCONFIG_ENABLE_TRIGGER.
_ENABLE_TRIGGER: Final = 1003
#: The prefix of the writer's ``TEMP`` copies of the log's other insert triggers.
_COPY_PREFIX: Final = "writer_copy_"


class TakeOver:
    """The writer connection's part in keeping the rollups (:func:`take_over`)."""

    def __init__(self, statements: tuple[str, ...], schema_version: int) -> None:
        #: the batch statements to run after each batch's insert; empty: the triggers do it all
        self.statements = statements
        #: the main schema's ``PRAGMA schema_version`` the statements were chosen for
        self.schema_version = schema_version
        #: the log opened on the connection taken over (set by its owner, ``RequestStore``)
        self.database: Database | None = None

    def renew(self, conn: sqlite3.Connection) -> None:
        """Take over again, for the log's schema as it is now (another connection changed
        it: the triggers may differ)."""
        again = take_over(conn)
        self.statements, self.schema_version = again.statements, again.schema_version


def batch_statements(triggers: tuple[str, ...]) -> tuple[str, ...]:
    """The statements that add a batch's rows (those with a rowid above ``:lo``) to the
    rollups the insert triggers ``triggers`` keep, in :data:`_STATEMENTS` order (only those it
    names)."""
    return tuple(build() for name, build in _STATEMENTS.items() if name in triggers)


def take_over(conn: sqlite3.Connection) -> TakeOver:
    """Turn the log's triggers off for ``conn`` (the writer's connection, outside a
    transaction), copy the insert triggers on ``requests`` that no batch statement replaces as
    ``TEMP`` triggers, and return the batch statements of the others. Where the triggers cannot
    be turned off, leave them on and return no statements. Called again (the log's schema
    changed: ``PRAGMA schema_version``), it first undoes what it did."""
    _restore(conn)
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    triggers = conn.execute(
        "SELECT name, tbl_name, sql FROM main.sqlite_master WHERE type = 'trigger'"
    ).fetchall()
    replaced = tuple(
        name for name, table, sql in triggers if table == "requests" and name in _STATEMENTS
    )
    if not replaced or not _switch(conn, on=False):
        return TakeOver((), version)
    try:
        for name, _, sql in triggers:
            if name not in replaced:
                conn.execute(_temp_copy(name, sql))
        conn.commit()
    except sqlite3.Error as exc:
        logger.warning("request log: the writer keeps the row triggers (%s)", exc)
        _restore(conn)
        return TakeOver((), version)
    return TakeOver(batch_statements(replaced), version)


def _temp_copy(name: str, sql: str) -> str:
    """``CREATE TRIGGER name ...`` (``sql``) as ``CREATE TEMP TRIGGER writer_copy_name ...``."""
    head = f"CREATE TRIGGER {name} "
    if not sql.startswith(head):
        raise sqlite3.OperationalError(f"trigger {name} has unexpected SQL: {sql[:60]!r}")
    return f"CREATE TEMP TRIGGER {_COPY_PREFIX}{name} {sql[len(head) :]}"


def _restore(conn: sqlite3.Connection) -> None:
    """Drop ``conn``'s ``TEMP`` trigger copies and turn its triggers back on."""
    copies = conn.execute(
        "SELECT name FROM temp.sqlite_master WHERE type = 'trigger' AND name LIKE ?",
        [_COPY_PREFIX + "%"],
    ).fetchall()
    for (name,) in copies:
        conn.execute(f"DROP TRIGGER temp.{name}")
    conn.commit()
    _switch(conn, on=True)


def _switch(conn: sqlite3.Connection, *, on: bool) -> bool:
    """Turn the main schema's triggers on or off for ``conn``; True when done. Turning them
    off is refused where it cannot be done safely: SQLite before 3.35 also turns ``TEMP``
    triggers off, and only Python 3.12's ``Connection.setconfig`` or, on CPython before 3.12
    on Linux, the C function through ``ctypes`` (:func:`_set_triggers`) reach the setting."""
    if not on and sqlite3.sqlite_version_info < (3, 35, 0):
        return False
    try:
        return _set_triggers(conn, on=on)
    except (OSError, AttributeError, ValueError, sqlite3.Error) as exc:
        logger.debug("request log: cannot switch the row triggers (%s)", exc)
        return False


def _set_triggers(conn: sqlite3.Connection, *, on: bool) -> bool:
    """Set ``conn``'s SQLITE_DBCONFIG_ENABLE_TRIGGER; True when it now reads ``on``.

    Python 3.12 has ``Connection.setconfig``. Before it, on CPython (Linux, where a variadic C
    function takes its arguments as a plain one does), the connection object's first field
    after its object header is its ``sqlite3 *`` handle (``Modules/_sqlite/connection.h`` of
    3.10 and 3.11); the handle is used only once ``sqlite3_db_filename`` on it names the
    file ``conn`` has open, and the setting counts only if it reads back as set.
    """
    setconfig = getattr(conn, "setconfig", None)
    if setconfig is not None:
        setconfig(_ENABLE_TRIGGER, on)
        return bool(conn.getconfig(_ENABLE_TRIGGER)) == on  # type: ignore[attr-defined]
    cpython_on_linux = sys.implementation.name == "cpython" and sys.platform == "linux"
    if not cpython_on_linux or sys.version_info >= (3, 12):
        return False
    import _sqlite3

    library = ctypes.CDLL(_sqlite3.__file__)
    filename = library.sqlite3_db_filename
    filename.restype = ctypes.c_char_p
    filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    path = conn.execute("SELECT file FROM pragma_database_list WHERE name = 'main'").fetchone()[0]
    if not handle or not path or filename(handle, b"main") != path.encode():
        return False
    state = ctypes.c_int(-1)
    config = library.sqlite3_db_config
    config.restype = ctypes.c_int
    wanted = 1 if on else 0
    if config(ctypes.c_void_p(handle), _ENABLE_TRIGGER, wanted, ctypes.byref(state)) != 0:
        return False
    return state.value == wanted
