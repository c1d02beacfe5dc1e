"""The 5-minute gap rollup: per prefix family and UTC hour, how many of its requests start
``LIFETIME_S["5m"]`` (300) s or more after the request before them, so that the TTL advisor's
5-minute write count (:func:`.report.queries.family_write_counts`) reads one row per hour
instead of every start time of the family.

``report_family_gaps_hourly`` (``key_fingerprint``, ``model``, ``prefix_family``, ``hour``;
``requests``, ``first_started_at``, ``last_started_at``, ``gaps_5m``) holds, for the requests
of one family (the family key of :data:`.rollup.FAMILY_KEY`, a NULL key fingerprint or model
stored as ``''``, as in ``report_family_hourly``; rows without a family are not counted)
that start in one hour (``CAST(started_at / 3600 AS INTEGER)``):

- ``requests``: how many;
- ``first_started_at`` / ``last_started_at``: the earliest and latest start time (unix s);
- ``gaps_5m``: the pairs of consecutive start times (in time order) *both inside the hour*
  with ``later >= earlier + 300`` (float arithmetic, the comparison of
  :func:`promptcache.ttl.write_counts`).

Over a run of hours, the 5-minute writes of the family are then: 1 (its first request) + the
hours' ``gaps_5m`` + one check ``first >= previous last + 300`` per pair of consecutive
non-empty hours (:data:`SEGMENTS`), which is exactly the ``LAG`` pass over all its start times:
every consecutive pair lies either inside one hour or across the edge between two consecutive
non-empty hours. Requests with equal start times form a pair with gap 0, never counted, so a
count depends only on the *set* of start times.

Keeping it. Adding start times changes only the pairs next to them: a set ``S`` gains a value
``v`` between its neighbours ``p < v < s`` and its count changes by
``[v >= p + 300] + [s >= v + 300] - [s >= p + 300]`` (0 when ``v`` is already in ``S``).
SQLite applies this per row (``FOR EACH ROW`` triggers, one writer at a time), and the reverse
on delete. Postgres triggers run once per statement over its new rows (:mod:`.rollup_postgres`):
with ``O`` the family-hour's start times before the statement and ``N`` the new ones, take
``Y`` = the new values plus, for each, its nearest neighbours below and above among all rows
now in the table; then ``count(O + N) - count(O) = count(Y) - count(Y ∩ O)``: the pairs of
``Y`` that differ are exactly those around each run of new values (whose outer neighbours
are in ``Y``); every other consecutive pair of ``Y`` is in both sets. The counts of ``Y``
cost a few index seeks per new row, whatever the family's density. Several proxies write
at once, and a change is not additive, so the Postgres trigger first locks the statement's
family-hour rows (in key order, like the other rollups), and only then, in a new statement
(a new snapshot under READ COMMITTED), reads the neighbours: a concurrent writer of the same
hour has committed by then, and its rows are part of ``O``.

Rows are found by ``idx_requests_family_gaps`` (the family key as stored here, then
``started_at``). Sources: Postgres 15 manual, "PL/pgSQL: Trigger Functions" and "Transaction
Isolation" (each command of a volatile function sees a new snapshot in READ COMMITTED),
https://www.postgresql.org/docs/15/plpgsql-trigger.html and
https://www.postgresql.org/docs/15/transaction-iso.html, checked 2026-12-03.
"""

from __future__ import annotations

from typing import Final

from sqlite_utils import Database

from promptcache.ttl import LIFETIME_S

from .dialect import is_postgres

__all__ = [
    "GAPS_INDEX",
    "GAPS_TABLE",
    "GAP_S",
    "SEGMENTS",
    "add_gap_rollup",
    "family_match",
    "reseek_gap_triggers",
]

GAPS_TABLE: Final = "report_family_gaps_hourly"
GAPS_INDEX: Final = "idx_requests_family_gaps"
#: The gap that makes a request a 5-minute cache write (s).
GAP_S: Final = 300
assert float(GAP_S) == LIFETIME_S["5m"]

_KEYS: Final = ("key_fingerprint", "model", "prefix_family", "hour")
_COLUMNS: Final = (*_KEYS, "requests", "first_started_at", "last_started_at", "gaps_5m")
_TRIGGER: Final = "report_rollup_gaps"
#: The family key of a ``requests`` row ``{r}``, as stored in the table (and the index).
_FAMILY: Final = (
    "COALESCE({r}.key_fingerprint, '')",
    "COALESCE({r}.model, '')",
    "COALESCE({r}.prefix_family, {r}.first_segment_hash)",
)


def family_match(r: str, key: str, model: str, family: str) -> str:
    """``requests AS r`` rows of the family whose stored key is (``key``, ``model``,
    ``family``), SQL expressions; spelled as the index is, so it serves the lookup."""
    k, m, f = (e.format(r=r) for e in _FAMILY)
    return f"{k} = {key} AND {m} = {model} AND {f} = {family}"


def _in_hour(r: str, hour: str, *, lower: bool = True, upper: bool = True) -> str:
    """``r`` starts in hour ``hour`` (the range lets an index seek; the CAST is the hour).
    ``lower`` / ``upper``: write the range's lower / upper bound (leave one out where the
    query bounds that side more tightly)."""
    bounds = []
    if lower:
        bounds.append(f"{r}.started_at >= {hour} * 3600 - 1")
    if upper:
        bounds.append(f"{r}.started_at < ({hour} + 1) * 3600 + 1")
    return " AND ".join([*bounds, f"CAST({r}.started_at / 3600 AS INTEGER) = {hour}"])


def _gap(earlier: str, later: str) -> str:
    """1 when both are known and ``later >= earlier + GAP_S``, else 0."""
    return (
        f"CASE WHEN {earlier} IS NOT NULL AND {later} IS NOT NULL"
        f" AND {later} >= {earlier} + {GAP_S} THEN 1 ELSE 0 END"
    )


def _keyed(source: str) -> str:
    """One row per ``source AS s`` row that has a family: its stored key (kf, model, fam,
    hour) and start time ``v``."""
    k, m, f = (e.format(r="s") for e in _FAMILY)
    return (
        f"SELECT {k} AS kf, {m} AS model, {f} AS fam,"
        f" CAST(s.started_at / 3600 AS INTEGER) AS hour, s.started_at AS v"
        f" FROM {source} AS s WHERE {f} IS NOT NULL"
    )


def _neighbours(x: str, *, one_bound: bool = False) -> str:
    """Scalar subqueries over ``requests``: rows of ``x``'s family at ``x.v`` (``same``), and
    the nearest start times below (``p``) and above (``s``) it in ``x``'s hour.

    ``one_bound`` (SQLite): each neighbour's range has one bound on each side, ``x.v`` and the
    hour's far edge; the hour's near edge, implied by ``x.v`` (in the hour), is left out. Given
    two lower bounds on ``started_at``, SQLite seeks to one of them, the hour's start, and read
    every earlier row of the family-hour before it reached the successor: each insert cost
    time in proportion to the requests its family had already made that hour (1.7 ms a row at
    4,000). The rows found are the same; the hour is still checked by its ``CAST``."""
    match = family_match("r", f"{x}.kf", f"{x}.model", f"{x}.fam")
    below = above = _in_hour("r", f"{x}.hour")
    if one_bound:
        below = _in_hour("r", f"{x}.hour", upper=False)
        above = _in_hour("r", f"{x}.hour", lower=False)
    return (
        f"(SELECT COUNT(*) FROM requests AS r WHERE {match} AND r.started_at = {x}.v) AS same,"
        f" {_nearest(f'{match} AND {below} AND r.started_at < {x}.v', 'DESC')} AS p,"
        f" {_nearest(f'{match} AND {above} AND r.started_at > {x}.v', 'ASC')} AS s"
    )


def _nearest(where: str, order: str) -> str:
    """The first ``requests AS r`` start time matching ``where`` in ``order``, as one index
    seek: ``ORDER BY ... LIMIT 1`` rather than ``MIN``/``MAX``, whose rewrite into a seek
    Postgres skips when it expects few rows (it then reads every row of the hour)."""
    return (
        f"(SELECT r.started_at FROM requests AS r WHERE {where}"
        f" ORDER BY r.started_at {order} LIMIT 1)"
    )


def _backfill() -> str:
    """Every family-hour of ``requests``, computed over its rows."""
    return f"""INSERT INTO {GAPS_TABLE} ({", ".join(_COLUMNS)})
        SELECT kf, model, fam, hour, COUNT(*), MIN(v), MAX(v), SUM({_gap("previous", "v")})
        FROM (SELECT kf, model, fam, hour, v,
                LAG(v) OVER (PARTITION BY kf, model, fam, hour ORDER BY v) AS previous
              FROM ({_keyed("requests")}) AS x) AS w
        GROUP BY kf, model, fam, hour"""


def _ddl() -> str:
    return f"""CREATE TABLE {GAPS_TABLE} (
        key_fingerprint TEXT NOT NULL, model TEXT NOT NULL, prefix_family TEXT NOT NULL,
        hour INTEGER NOT NULL, requests INTEGER NOT NULL, first_started_at REAL NOT NULL,
        last_started_at REAL NOT NULL, gaps_5m INTEGER NOT NULL,
        PRIMARY KEY (key_fingerprint, model, prefix_family, hour))"""


def _sqlite_triggers() -> list[str]:
    """Row triggers: a new start time's change to its hour's count (module docstring)."""
    k, m, f = (e.format(r="NEW") for e in _FAMILY)
    new = f"""SELECT x.kf, x.model, x.fam, x.hour, x.v, {_neighbours("x", one_bound=True)}
        FROM (SELECT {k} AS kf, {m} AS model, {f} AS fam,
                CAST(NEW.started_at / 3600 AS INTEGER) AS hour, NEW.started_at AS v) AS x"""
    insert = f"""INSERT INTO {GAPS_TABLE} ({", ".join(_COLUMNS)})
        SELECT kf, model, fam, hour, 1, v, v,
          CASE WHEN same > 1 THEN 0
               ELSE {_gap("p", "v")} + {_gap("v", "s")} - {_gap("p", "s")} END
        FROM ({new}) AS y WHERE true
        ON CONFLICT ({", ".join(_KEYS)}) DO UPDATE SET requests = requests + 1,
          first_started_at = MIN(first_started_at, excluded.first_started_at),
          last_started_at = MAX(last_started_at, excluded.last_started_at),
          gaps_5m = gaps_5m + excluded.gaps_5m"""
    ok, om, of = (e.format(r="OLD") for e in _FAMILY)
    old = f"""SELECT x.kf, x.model, x.fam, x.hour, x.v, {_neighbours("x", one_bound=True)}
        FROM (SELECT {ok} AS kf, {om} AS model, {of} AS fam,
                CAST(OLD.started_at / 3600 AS INTEGER) AS hour, OLD.started_at AS v) AS x"""
    this = (
        f"key_fingerprint = {ok} AND model = {om} AND prefix_family = {of}"
        f" AND hour = CAST(OLD.started_at / 3600 AS INTEGER)"
    )
    rest = family_match("r", ok, om, of) + " AND " + _in_hour("r", f"{GAPS_TABLE}.hour")
    update = f"""UPDATE {GAPS_TABLE} SET requests = requests - 1,
          gaps_5m = gaps_5m + (SELECT CASE WHEN same > 0 THEN 0
              ELSE {_gap("p", "s")} - {_gap("p", "v")} - {_gap("v", "s")} END FROM ({old}) AS y),
          first_started_at = COALESCE({_nearest(rest, "ASC")}, first_started_at),
          last_started_at = COALESCE({_nearest(rest, "DESC")}, last_started_at)
        WHERE {this}"""
    return [
        f"""CREATE TRIGGER {_TRIGGER} AFTER INSERT ON requests WHEN {f} IS NOT NULL
        BEGIN {insert}; END""",
        f"""CREATE TRIGGER {_TRIGGER}_delete AFTER DELETE ON requests WHEN {of} IS NOT NULL
        BEGIN {update}; DELETE FROM {GAPS_TABLE} WHERE {this} AND requests <= 0; END""",
    ]


def _changes(source: str, *, delete: bool) -> str:
    """Per family-hour of the statement's rows ``source`` (``new_rows`` / ``old_rows``):
    ``kf, model, fam, hour, n`` (rows added, negative when deleted), ``first``, ``last``
    (of those rows) and ``gaps`` (the change to ``gaps_5m``), by the ``Y`` rule of the module
    docstring. ``requests`` holds the rows after the statement."""
    # ``before``: a value is in O (the set without the statement's rows) when more rows have
    # it than the statement added (insert), or when a row still has it (delete); OLD and NEW
    # are PL/pgSQL's own names, never columns here
    old_when = "0" if delete else "cn"
    keys = "kf, model, fam, hour"
    gaps = f"SUM({_gap('previous', 'value')})"
    sign = "-" if delete else ""
    return f"""WITH x AS (
          SELECT {keys}, v, COUNT(*) AS cn FROM ({_keyed(source)}) AS k GROUP BY {keys}, v),
        n AS (SELECT x.kf, x.model, x.fam, x.hour, x.v, x.cn, {_neighbours("x")} FROM x),
        y AS (SELECT {keys}, value, MIN(before) AS before
              FROM (SELECT {keys}, v AS value,
                      CASE WHEN same > {old_when} THEN 1 ELSE 0 END AS before
                    FROM n
                    UNION ALL SELECT {keys}, p, 1 FROM n WHERE p IS NOT NULL
                    UNION ALL SELECT {keys}, s, 1 FROM n WHERE s IS NOT NULL) AS u
              GROUP BY {keys}, value),
        every AS (SELECT {keys}, {gaps} AS gaps
              FROM (SELECT {keys}, value,
                      LAG(value) OVER (PARTITION BY {keys} ORDER BY value) AS previous
                    FROM y) AS w GROUP BY {keys}),
        kept AS (SELECT {keys}, {gaps} AS gaps
              FROM (SELECT {keys}, value,
                      LAG(value) OVER (PARTITION BY {keys} ORDER BY value) AS previous
                    FROM y WHERE before = 1) AS w GROUP BY {keys}),
        added AS (SELECT {keys}, SUM(cn) AS n, MIN(v) AS first, MAX(v) AS last
              FROM x GROUP BY {keys})
        SELECT a.kf, a.model, a.fam, a.hour, {sign}a.n AS n, a.first, a.last,
          {sign}(e.gaps - COALESCE(k.gaps, 0)) AS gaps
        FROM added AS a
        JOIN every AS e ON e.kf = a.kf AND e.model = a.model AND e.fam = a.fam
          AND e.hour = a.hour
        LEFT JOIN kept AS k ON k.kf = a.kf AND k.model = a.model AND k.fam = a.fam
          AND k.hour = a.hour"""


def _postgres_bodies() -> tuple[list[str], list[str]]:
    """(insert body, delete body): SQLite-dialect statements for :mod:`.rollup_postgres`."""
    keys = "kf, model, fam, hour"
    table_keys = ", ".join(_KEYS)
    this = (
        f"{GAPS_TABLE}.key_fingerprint = d.kf AND {GAPS_TABLE}.model = d.model"
        f" AND {GAPS_TABLE}.prefix_family = d.fam AND {GAPS_TABLE}.hour = d.hour"
    )
    # 1: lock the statement's family-hours (creating the missing ones), in key order
    lock = f"""INSERT INTO {GAPS_TABLE} ({", ".join(_COLUMNS)})
        SELECT {keys}, 0, MIN(v), MAX(v), 0 FROM ({_keyed("new_rows")}) AS k
        GROUP BY {keys} ORDER BY {keys}
        ON CONFLICT ({table_keys}) DO UPDATE SET requests = {GAPS_TABLE}.requests"""
    # 2: a new snapshot, which holds every committed row of those hours
    add = f"""UPDATE {GAPS_TABLE} SET requests = {GAPS_TABLE}.requests + d.n,
          first_started_at = MIN({GAPS_TABLE}.first_started_at, d.first),
          last_started_at = MAX({GAPS_TABLE}.last_started_at, d.last),
          gaps_5m = {GAPS_TABLE}.gaps_5m + d.gaps
        FROM ({_changes("new_rows", delete=False)}) AS d WHERE {this}"""
    lock_old = f"""PERFORM 1 FROM {GAPS_TABLE}
        WHERE ({table_keys}) IN (SELECT {keys} FROM ({_keyed("old_rows")}) AS k)
        ORDER BY {table_keys} FOR UPDATE"""
    g = GAPS_TABLE
    rest = (
        family_match("r", f"{g}.key_fingerprint", f"{g}.model", f"{g}.prefix_family")
        + " AND "
        + _in_hour("r", f"{g}.hour")
    )
    remove = f"""UPDATE {GAPS_TABLE} SET requests = {GAPS_TABLE}.requests + d.n,
          gaps_5m = {GAPS_TABLE}.gaps_5m + d.gaps,
          first_started_at = COALESCE({_nearest(rest, "ASC")}, {GAPS_TABLE}.first_started_at),
          last_started_at = COALESCE({_nearest(rest, "DESC")}, {GAPS_TABLE}.last_started_at)
        FROM ({_changes("old_rows", delete=True)}) AS d WHERE {this}"""
    empty = f"""DELETE FROM {GAPS_TABLE} WHERE requests <= 0
        AND ({table_keys}) IN (SELECT {keys} FROM ({_keyed("old_rows")}) AS k)"""
    return [lock, add], [lock_old, remove, empty]


#: One family's segments in the report window (named parameters of
#: :meth:`.report.window.Window.params` plus ``kf``, ``model``, ``first`` as stored here):
#: rows ``(n, gaps, first, last)``, one per non-empty whole hour from the table, and one for
#: each partial edge hour computed from its rows (``n`` 0 when it has none).
SEGMENTS: Final = f"""
    SELECT requests AS n, gaps_5m AS gaps, first_started_at AS first, last_started_at AS last
    FROM {GAPS_TABLE}
    WHERE key_fingerprint = :kf AND model = :model AND prefix_family = :first
      AND hour >= :h0 AND hour < :h1 AND requests > 0
    UNION ALL
    SELECT COUNT(*), TOTAL({_gap("previous", "started_at")}), MIN(started_at), MAX(started_at)
    FROM (SELECT r.started_at, LAG(r.started_at) OVER (ORDER BY r.started_at) AS previous
          FROM requests AS r INDEXED BY {GAPS_INDEX}
          WHERE {family_match("r", ":kf", ":model", ":first")}
            AND r.started_at >= :t0 AND r.started_at < :e0) AS lead
    UNION ALL
    SELECT COUNT(*), TOTAL({_gap("previous", "started_at")}), MIN(started_at), MAX(started_at)
    FROM (SELECT r.started_at, LAG(r.started_at) OVER (ORDER BY r.started_at) AS previous
          FROM requests AS r INDEXED BY {GAPS_INDEX}
          WHERE {family_match("r", ":kf", ":model", ":first")}
            AND r.started_at >= :e1 AND r.started_at < :t1) AS trail
"""


def reseek_gap_triggers(db: Database) -> None:
    """Schema step 16: the SQLite gap triggers again, their neighbours found with one bound
    on each side (`_neighbours`); the rollup's rows are what the new triggers would have made,
    so they stay. Postgres' statement triggers are unchanged (its index scans take the
    tightest of several bounds)."""
    if is_postgres(db):
        return
    for trigger in (_TRIGGER, f"{_TRIGGER}_delete"):
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for statement in _sqlite_triggers():
        db.execute(statement)


def add_gap_rollup(db: Database) -> None:
    """Schema step 15: ``idx_requests_family_gaps``, ``report_family_gaps_hourly`` and the
    triggers that keep it, filled from the rows already logged (rebuilt if they exist). Runs
    inside the migration's transaction."""
    index = (
        f"CREATE INDEX IF NOT EXISTS {GAPS_INDEX} ON requests"
        f" ({', '.join('(' + e.replace('{r}.', '') + ')' for e in _FAMILY)}, started_at)"
    )
    if is_postgres(db):
        from . import rollup_postgres

        rollup_postgres.drop(db, _TRIGGER)
        db.execute(index)
        db.execute(f"DROP TABLE IF EXISTS {GAPS_TABLE}")
        db.execute(_ddl())
        db.execute("SET LOCAL work_mem = '256MB'")  # the fill sorts every row once
        insert, delete = _postgres_bodies()
        rollup_postgres.install_statement_triggers(db, _TRIGGER, insert, delete)
        db.execute(_backfill())
        db.execute(f"ANALYZE {GAPS_TABLE}")
        return
    for trigger in (_TRIGGER, f"{_TRIGGER}_delete"):
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    db.execute(index)
    db.execute(f"DROP TABLE IF EXISTS {GAPS_TABLE}")
    db.execute(_ddl())
    for statement in _sqlite_triggers():
        db.execute(statement)
    db.execute(_backfill())
