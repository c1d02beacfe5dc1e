"""The report rollups of a Postgres log, kept by statement-level triggers over the rollups' SQL.

A SQLite log keeps ``report_hourly``, ``report_breaks_hourly``, ``report_family_hourly`` and
``report_replica_hourly`` with ``FOR EACH ROW`` triggers (:mod:`.rollup`, :mod:`.replica_rollup`).
Postgres runs the same per-request SQL (:func:`.rollup.break_rows`, :func:`.rollup.family_rows`,
:func:`.replica_rollup.replica_rows` and the hourly values, translated by :mod:`.dialect`) once
per ``INSERT``/``COPY`` statement instead, over the statement's new rows (a transition table,
``REFERENCING NEW TABLE AS new_rows``): the rows are summed per rollup key and added with one
``INSERT ... ON CONFLICT DO UPDATE``. The writer inserts a batch per statement, so a batch costs
one upsert per rollup, whatever its size.

Several proxies write one log at once. Each upsert takes its keys in key order, and the
triggers of one statement always run in the same order (Postgres runs a table's triggers by
name), so two writers' transactions lock rollup rows in one global order and cannot deadlock
on them; a writer that touches a row another holds waits for that commit.

Deleting rows subtracts them from ``report_hourly`` and ``report_replica_hourly`` and their
breaks from ``report_breaks_hourly``, as the SQLite delete triggers do.

Sources: Postgres 15 manual, "CREATE TRIGGER" (transition tables, statement-level triggers,
firing order by name) and "INSERT" (ON CONFLICT: a command cannot affect one row twice, so rows
are summed per key first), https://www.postgresql.org/docs/15/sql-createtrigger.html and
https://www.postgresql.org/docs/15/sql-insert.html, checked 2026-12-03.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .dialect import to_postgres
from .replica_rollup import replica_rows
from .rollup import (
    _BREAK_TRIGGER,
    _FAMILY_TRIGGER,
    _HOURLY_KEY,
    _HOURLY_SUMS,
    _HOURLY_VALUES,
    _READ_BACK,
    _READ_BACK_VALUES,
    _READS_PREDECESSOR,
    BREAK_COLUMNS,
    break_rows,
    family_rows,
)

__all__ = [
    "drop",
    "install_breaks",
    "install_family",
    "install_hourly",
    "install_replica",
    "install_statement_triggers",
    "install_ttft",
]

_HOURLY_KEYS = ("hour", "model", "route", "key_fingerprint", "vendor")
_HOURLY_TRIGGER = "report_rollup_insert"
_REPLICA_TRIGGER = "report_rollup_replica"


def _upsert(
    table: str,
    keys: Sequence[str],
    values: Sequence[str],
    rows: str,
    *,
    aggregate: dict[str, str] | None = None,
    update: dict[str, str] | None = None,
    sign: str = "+",
) -> str:
    """Sum ``rows`` (a SELECT whose columns are ``keys`` then ``values``) per key and add the
    sums into ``table`` (``sign="-"``: subtract). ``aggregate`` names another aggregate than
    SUM for a column, ``update`` another merge than ``old + new``."""
    aggregate = aggregate or {}
    update = update or {}
    names = [*keys, *values]
    key_list = ", ".join(keys)
    sums = ", ".join(f"{aggregate.get(v, 'SUM')}({v})" for v in values)
    sets = ", ".join(f"{v} = " + update.get(v, f"{table}.{v} {sign} excluded.{v}") for v in values)
    return f"""INSERT INTO {table} ({", ".join(names)})
        SELECT {key_list}, {sums} FROM ({rows}) AS x ({", ".join(names)})
        GROUP BY {key_list} ORDER BY {key_list}
        ON CONFLICT ({key_list}) DO UPDATE SET {sets}"""


def _function(db: Any, name: str, body: Sequence[str]) -> None:
    statements = "".join(f"  {to_postgres(s, parameters=False)};\n" for s in body)
    db.conn.execute_native(
        f"CREATE OR REPLACE FUNCTION {name}_fn() RETURNS trigger LANGUAGE plpgsql AS $body$\n"
        f"BEGIN\n{statements}  RETURN NULL;\nEND\n$body$"
    )


def _trigger(db: Any, name: str, event: str, body: Sequence[str]) -> None:
    """(Re)create statement trigger ``name`` on ``event`` running ``body`` (SQLite SQL over
    ``new_rows`` for INSERT, ``old_rows`` for DELETE)."""
    _function(db, name, body)
    table = "NEW TABLE AS new_rows" if event == "INSERT" else "OLD TABLE AS old_rows"
    db.conn.execute_native(f"DROP TRIGGER IF EXISTS {name} ON requests")
    db.conn.execute_native(
        f"CREATE TRIGGER {name} AFTER {event} ON requests REFERENCING {table}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION {name}_fn()"
    )


def drop(db: Any, name: str) -> None:
    """Drop trigger ``name`` (and its delete twin) and their functions, if they exist."""
    for trigger in (name, f"{name}_delete"):
        db.conn.execute_native(f"DROP TRIGGER IF EXISTS {trigger} ON requests")
        db.conn.execute_native(f"DROP FUNCTION IF EXISTS {trigger}_fn()")


def _hourly_rows(source: str, *, read_back: bool = True) -> str:
    """Per-request ``report_hourly`` rows of ``source AS r`` and, with ``read_back``, the
    read-back credit each gives its predecessor ``p`` (the SQLite read-back trigger's rows)."""
    own = f"""SELECT {_HOURLY_KEY.format(r="r")}, {_HOURLY_VALUES.format(r="r")}
        {", 0, 0, 0, 0" if read_back else ""} FROM {source} AS r"""
    if not read_back:
        return own
    zeros = ", ".join("0" for _ in _HOURLY_SUMS)
    credit = f"""SELECT hour, model, route, key_fingerprint, vendor, {zeros},
          CASE WHEN w5 + w1 + wu > 0 THEN 1 ELSE 0 END, w5, w1, wu
        FROM (SELECT {_HOURLY_KEY.format(r="p")}, {_READ_BACK_VALUES.format(r="r")}
              FROM {source} AS r JOIN requests AS p ON p.id = r.previous_request_id
              WHERE {_READS_PREDECESSOR.format(r="r")}) AS c"""
    return f"{own} UNION ALL {credit}"


def install_hourly(db: Any) -> None:
    """Triggers that keep ``report_hourly``; refills it from ``requests``."""
    columns = (*_HOURLY_SUMS, *_READ_BACK)
    insert = _upsert("report_hourly", _HOURLY_KEYS, columns, _hourly_rows("new_rows"))
    _trigger(db, _HOURLY_TRIGGER, "INSERT", [insert])
    _trigger(
        db,
        f"{_HOURLY_TRIGGER}_delete",
        "DELETE",
        [
            _upsert(
                "report_hourly",
                _HOURLY_KEYS,
                _HOURLY_SUMS,
                _hourly_rows("old_rows", read_back=False),
                sign="-",
            ),
            *_unbreak_statements(),
        ],
    )
    db.execute("DELETE FROM report_hourly")
    db.execute(_upsert("report_hourly", _HOURLY_KEYS, columns, _hourly_rows("requests")))


def _unbreak_statements() -> list[str]:
    """The delete trigger's ``report_breaks_hourly`` part (the SQLite trigger's, for a
    statement's rows): each deleted break, counted, with the tokens it lost through its
    predecessor (still logged, or deleted by the same statement), and the tokens that the breaks
    of the requests left lost through a deleted predecessor (0 now, as the rows left give)."""
    keys, values = BREAK_COLUMNS[:4], BREAK_COLUMNS[4:]
    return [
        _upsert("report_breaks_hourly", keys, values, rows, sign="-")
        for rows in (
            break_rows("true", "old_rows"),
            break_rows("true", "old_rows", predecessors="old_rows", breaks=0),
            break_rows(
                "r.previous_request_id IN (SELECT id FROM old_rows)",
                predecessors="old_rows",
                breaks=0,
            ),
        )
    ]


def install_breaks(db: Any) -> None:
    """The trigger that keeps ``report_breaks_hourly``; refills it from ``requests``."""
    keys, values = BREAK_COLUMNS[:4], BREAK_COLUMNS[4:]
    insert = _upsert("report_breaks_hourly", keys, values, break_rows("true", "new_rows"))
    _trigger(db, _BREAK_TRIGGER, "INSERT", [insert])
    db.execute("DELETE FROM report_breaks_hourly")
    db.execute(_upsert("report_breaks_hourly", keys, values, break_rows("true")))


def install_family(db: Any, name: str) -> None:
    """The trigger that keeps ``report_family_hourly`` keyed by column ``name``; refills it."""
    keys = ("hour", "key_fingerprint", "model", name)
    values = ("vendor", "requests", "input_tokens", "cache_write_5m_tokens",
              "cache_write_1h_tokens", "cached_prefix_tokens", "cached_requests",
              "min_prefix_tokens")  # fmt: skip
    table = "report_family_hourly"
    options: dict[str, Any] = {
        "aggregate": {"vendor": "MAX", "min_prefix_tokens": "MIN"},
        "update": {
            "vendor": f"MAX({table}.vendor, excluded.vendor)",
            "min_prefix_tokens": f"MIN(COALESCE({table}.min_prefix_tokens,"
            f" excluded.min_prefix_tokens), COALESCE(excluded.min_prefix_tokens,"
            f" {table}.min_prefix_tokens))",
        },
    }
    rows = family_rows("true", "new_rows", name)
    _trigger(db, _FAMILY_TRIGGER, "INSERT", [_upsert(table, keys, values, rows, **options)])
    db.execute(f"DELETE FROM {table}")
    db.execute(_upsert(table, keys, values, family_rows("true", "requests", name), **options))


def install_replica(db: Any, sums: tuple[tuple[str, str], ...]) -> None:
    """Triggers that keep ``report_replica_hourly`` over ``sums``; refills it."""
    keys = ("hour", "upstream", "replica")
    values = [name for name, _ in sums]
    table = "report_replica_hourly"
    insert = _upsert(table, keys, values, replica_rows("true", "new_rows", sums))
    delete = _upsert(table, keys, values, replica_rows("true", "old_rows", sums), sign="-")
    _trigger(db, _REPLICA_TRIGGER, "INSERT", [insert])
    _trigger(db, f"{_REPLICA_TRIGGER}_delete", "DELETE", [delete])
    db.execute(f"DELETE FROM {table}")
    db.execute(_upsert(table, keys, values, replica_rows("true", "requests", sums)))


def install_ttft(db: Any, name: str, rows: Callable[[str, str], str]) -> None:
    """Triggers ``name`` (insert) and ``name_delete`` that keep ``report_ttft_hourly`` (rows of
    :func:`.ttft_rollup.ttft_rows`, passed as ``rows``); fills it from ``requests``."""
    keys, values = ("hour", "hit", "bucket"), ("requests",)
    table = "report_ttft_hourly"
    _trigger(db, name, "INSERT", [_upsert(table, keys, values, rows("true", "new_rows"))])
    delete = _upsert(table, keys, values, rows("true", "old_rows"), sign="-")
    _trigger(db, f"{name}_delete", "DELETE", [delete])
    db.execute(f"DELETE FROM {table}")
    db.execute(_upsert(table, keys, values, rows("true", "requests")))


def install_statement_triggers(
    db: Any, name: str, insert: Sequence[str], delete: Sequence[str]
) -> None:
    """Triggers ``name`` (after INSERT, over ``new_rows``) and ``name_delete`` (after DELETE,
    over ``old_rows``) running the SQLite-dialect statements ``insert`` / ``delete`` in order,
    each a command of its own (under READ COMMITTED, each sees a new snapshot)."""
    _trigger(db, name, "INSERT", insert)
    _trigger(db, f"{name}_delete", "DELETE", delete)
