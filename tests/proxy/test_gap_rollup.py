"""The 5-minute gap rollup (``report_family_gaps_hourly``, ``proxy/gap_rollup.py``) equals the
row-based computation, on SQLite (row triggers) and on a real Postgres (statement triggers):

- after random logs are inserted in random batches and random order, and after random
  deletes, every family-hour row equals its recount here in Python from the test's own rows
  (requests, first and last start, gaps of 300 s or more between consecutive starts inside
  the hour), and no family-hour without rows is left;
- the TTL advisor's 5-minute count that the report reads from it
  (``queries.family_write_counts``) equals the ``LAG`` pass over the family's rows in the
  database and ``promptcache.ttl.write_counts`` over the test's own start times, over windows
  with and without partial edge hours;
- two Postgres writers committing start times of one family-hour at the same moment (the
  second waits for the first's lock) leave the count of the combined set, not the sum of
  two counts over the set each saw;
- the migration's fill of an existing log equals what the triggers keep.

Start times sit on and a hair around the 300 s threshold and the hour edges, with ties.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from promptcache.proxy.gap_rollup import GAPS_TABLE, add_gap_rollup
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import queries as q
from promptcache.proxy.report.window import Window
from promptcache.proxy.store import open_log
from promptcache.proxy.store_postgres import PgConnection, insert_rows
from promptcache.ttl import write_counts

T0 = 1_760_000_400.0  # a whole hour (488,889 x 3600)
EDGES = (0.0, 1e-6, 0.001, 3599.999, 3599.9999995)  # seconds into an hour
#: (key fingerprint, model, family): the first two are one family ('' and NULL are one, as in
#: the family rollup), so most rows share a few family-hours
FAMILIES = ((None, None, "fam-a"), ("", "", "fam-a"), ("k1", "claude-sonnet-4-5", "fam-b"))
_examples = itertools.count()


def _family(key: str | None, model: str | None, fam: str) -> tuple[str, str, str]:
    return (key or "", model or "", fam)


def _row(ident: str, at: float, key: str | None, model: str | None, fam: str) -> dict[str, Any]:
    values = dict.fromkeys(COLUMN_NAMES)
    values.update(
        id=ident, started_at=at, vendor="anthropic", api="anthropic", model=model,
        key_fingerprint=key, status=200, stream=0, uncached_input_tokens=100,
        cache_read_tokens=0, cache_write_5m_tokens=0, cache_write_1h_tokens=0,
        cache_write_unknown_tokens=0, output_tokens=5, total_input_tokens=100,
        first_segment_hash=fam if ident.endswith("1") else "other-first",
        prefix_family=None if ident.endswith("1") else fam,
    )  # fmt: skip
    return values


starts = st.one_of(
    # on a 300 s grid, a hair around it, and at the hour edges
    st.tuples(st.integers(0, 2), st.integers(0, 11), st.sampled_from((-0.001, 0.0, 0.001))).map(
        lambda t: T0 + 3600 * t[0] + max(0.0, 300 * t[1] + t[2])
    ),
    st.tuples(st.integers(0, 2), st.sampled_from(EDGES)).map(lambda t: T0 + 3600 * t[0] + t[1]),
    st.floats(T0 - 100, T0 + 3 * 3600, allow_nan=False),
)
logs = st.lists(st.tuples(starts, st.sampled_from(FAMILIES)), min_size=1, max_size=40)


def expected_hours(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Family-hour -> (requests, first, last, gaps_5m), counted over the rows themselves."""
    times: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in rows:
        fam = r["prefix_family"] or r["first_segment_hash"]
        hour = int(r["started_at"] / 3600)  # the rollups' CAST(started_at / 3600 AS INTEGER)
        times[(*_family(r["key_fingerprint"], r["model"], fam), hour)].append(r["started_at"])
    out = {}
    for key, values in times.items():
        values.sort()
        gaps = sum(1 for a, b in itertools.pairwise(values) if b >= a + 300)
        out[key] = (len(values), values[0], values[-1], gaps)
    return out


def stored_hours(conn: Any, families: set[str]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    rows = conn.execute(
        f"SELECT key_fingerprint, model, prefix_family, hour, requests, first_started_at,"
        f" last_started_at, gaps_5m FROM {GAPS_TABLE}"
    ).fetchall()
    return {
        tuple(r[:4]): (int(r[4]), float(r[5]), float(r[6]), int(r[7]))
        for r in rows
        if r[2] in families
    }


LAG_PASS = """
    SELECT COUNT(*), TOTAL(CASE WHEN previous IS NULL OR started_at >= previous + 300
                                THEN 1 ELSE 0 END)
    FROM (SELECT started_at, LAG(started_at) OVER (ORDER BY started_at) AS previous
          FROM requests WHERE COALESCE(key_fingerprint, '') = :kf AND COALESCE(model, '') = :m
            AND COALESCE(prefix_family, first_segment_hash) = :f
            AND started_at >= :t0 AND started_at < :t1) AS x
"""
WINDOWS = ((T0 - 3600, T0 + 10 * 3600), (T0 + 1000.5, T0 + 3 * 3600 + 77.25),
           (T0 + 3600 + 10, T0 + 3600 + 900), (T0 + 3600, T0 + 3 * 3600))  # fmt: skip


def check(conn: Any, rows: list[dict[str, Any]], families: set[str]) -> None:
    assert stored_hours(conn, families) == expected_hours(rows)
    by_family: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in rows:
        fam = r["prefix_family"] or r["first_segment_hash"]
        by_family[_family(r["key_fingerprint"], r["model"], fam)].append(r["started_at"])
    for (kf, model, fam), times in by_family.items():
        family = q.FamilyRow(kf or None, model or None, fam, "anthropic", 0, 0, 0, 0, 0)
        for since, until in WINDOWS:
            inside = [t for t in times if since <= t < until]
            counts = q.family_write_counts(conn, family, Window(since, until))
            if not inside:
                assert counts is None
                continue
            n, writes = conn.execute(
                LAG_PASS, {"kf": kf, "m": model, "f": fam, "t0": since, "t1": until}
            ).fetchone()
            assert counts is not None
            assert (counts.num_requests, counts.writes_5m) == (int(n), int(writes))
            assert counts == write_counts(inside)


def build(example: int, log: list[tuple[Any, ...]]) -> tuple[list[dict[str, Any]], set[str]]:
    rows = [
        _row(f"e{example}-{i}-{i % 2}", at, key, model, f"{example}-{fam}")
        for i, (at, (key, model, fam)) in enumerate(log)
    ]
    return rows, {f"{example}-{fam}" for _, _, fam in FAMILIES}


def batches(rows: list[dict[str, Any]], sizes: list[int]) -> list[list[dict[str, Any]]]:
    out, i = [], 0
    for size in itertools.cycle(sizes):
        if i >= len(rows):
            return out
        out.append(rows[i : i + size])
        i += size
    return out  # pragma: no cover - the cycle above only ends by returning


plans = st.tuples(logs, st.randoms(use_true_random=False), st.lists(st.integers(1, 9), min_size=1,
                  max_size=4), st.lists(st.booleans(), max_size=40))  # fmt: skip


@pytest.fixture(scope="module")
def sqlite_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    db = open_log(tmp_path_factory.mktemp("gaps") / "log.db")
    yield db
    db.close()


SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW_OK)
@given(plan=plans)
def test_sqlite_rollup_equals_the_rows(sqlite_log: Database, plan: Any) -> None:
    log, rng, sizes, deleted = plan
    rows, families = build(next(_examples), log)  # families of its own in the shared log
    rng.shuffle(rows)
    db = sqlite_log
    for batch in batches(rows, sizes):
        with db.conn:
            db.table("requests").insert_all(batch)
    check(db.conn, rows, families)
    gone = [r for r, d in zip(rows, deleted, strict=False) if d]
    with db.conn:
        db.conn.executemany("DELETE FROM requests WHERE id = ?", [(r["id"],) for r in gone])
    kept = [r for r in rows if r not in gone]
    check(db.conn, kept, families)


@pytest.fixture(scope="module")
def pg_log(postgres_server: Any) -> str:
    url = postgres_server.create_database()
    open_log(url).close()
    return url


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW_OK)
@given(plan=plans)
def test_postgres_rollup_equals_the_rows(pg_log: str, plan: Any) -> None:
    log, rng, sizes, deleted = plan
    rows, families = build(next(_examples), log)  # families of its own in the shared log
    rng.shuffle(rows)
    with psycopg.connect(pg_log) as raw:
        for batch in batches(rows, sizes):
            insert_rows(raw, batch)  # one COPY: the statement triggers see the whole batch
        conn = PgConnection(pg_log, conn=raw)
        check(conn, rows, families)
        gone = [r["id"] for r, d in zip(rows, deleted, strict=False) if d]
        raw.execute("DELETE FROM requests WHERE id = ANY(%s)", [gone])
        raw.commit()
        kept = [r for r in rows if r["id"] not in gone]
        check(conn, kept, families)
        raw.rollback()


def test_postgres_concurrent_writers_of_one_hour(pg_url: str) -> None:
    """0 s is logged; writer A adds 400 s, writer B 500 s, both before either commits. The
    set {0, 400, 500} has one 5-minute gap (0 -> 400); each writer alone would add one."""
    fam = "concurrent"
    first = [_row("c-0-0", T0, "k1", "m", fam)]
    open_log(pg_url).close()
    with psycopg.connect(pg_url) as setup:
        insert_rows(setup, first)
    a = psycopg.connect(pg_url)
    b = psycopg.connect(pg_url)
    try:
        row_a, row_b = (
            _row("c-1-0", T0 + 400, "k1", "m", fam),
            _row("c-2-0", T0 + 500, "k1", "m", fam),
        )
        columns = list(row_a)
        copy = f"COPY requests ({', '.join(columns)}) FROM STDIN"

        def write(conn: psycopg.Connection[Any], row: dict[str, Any]) -> None:
            with conn.cursor() as cursor, cursor.copy(copy) as out:
                out.write_row([row[c] for c in columns])

        write(a, row_a)  # A's rows and lock, uncommitted
        done = threading.Event()

        def second() -> None:
            write(b, row_b)  # waits in its trigger for A's lock
            b.commit()
            done.set()

        thread = threading.Thread(target=second)
        thread.start()
        assert not done.wait(1.0)  # B waits for A
        a.commit()
        thread.join(30)
        assert done.is_set()
        conn = PgConnection(pg_url)
        try:
            check(conn, [*first, row_a, row_b], {fam})
            hour = int(T0 // 3600)
            assert stored_hours(conn, {fam})[("k1", "m", fam, hour)][3] == 1
        finally:
            conn.close()
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migration_fill_equals_the_triggers(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Rows logged with the triggers, then the table rebuilt by the migration step's fill."""
    rows = [
        _row(f"m-{i}-{i % 2}", T0 + at, key, "m", fam)
        for i, (at, key, fam) in enumerate(
            itertools.product(
                (0.0, 299.999, 300.0, 3599.9999995, 3600.0, 4000.0, 4300.0),
                (None, "k1"),
                ("f1", "f2"),
            )
        )
    ]
    url = request.getfixturevalue("pg_url") if backend == "postgres" else tmp_path / "log.db"
    db = open_log(url)
    try:
        if backend == "postgres":
            with psycopg.connect(str(url)) as raw:
                insert_rows(raw, rows)
        else:
            with db.conn:
                db.table("requests").insert_all(rows)
        kept = stored_hours(db.conn, {"f1", "f2"})
        assert kept == expected_hours(rows)
        add_gap_rollup(db)  # drop and refill from requests
        db.conn.commit()
        assert stored_hours(db.conn, {"f1", "f2"}) == kept
    finally:
        db.close()


def _insert_steps(db: Database, row: dict[str, Any]) -> int:
    """SQLite virtual-machine steps (a count, not a time) to insert ``row``, triggers included."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    db.conn.set_progress_handler(count, 1)
    try:
        with db.conn:
            db.table("requests").insert(row)
    finally:
        db.conn.set_progress_handler(None, 1)
    return steps[0]


def test_an_insert_costs_the_same_however_busy_its_family_hour(tmp_path: Path) -> None:
    """The triggers find a new row's neighbours with one index seek each side: inserting into a
    family-hour that holds 2,000 rows takes about as many steps as into one that holds 20 (each
    neighbour's range once began at the hour's start and read every earlier row)."""
    db = open_log(tmp_path / "log.db")
    rows = []
    try:
        for fam, count in (("quiet", 20), ("busy", 2000)):
            rows += [_row(f"{fam}-{i}", T0 + i * 1.5, "k1", "m", fam) for i in range(count)]
        with db.conn:
            db.table("requests").insert_all(rows)
        last = [_row(f"{fam}-new", T0 + 3590.0, "k1", "m", fam) for fam in ("quiet", "busy")]
        quiet, busy = (_insert_steps(db, row) for row in last)
        assert busy < quiet * 1.5, (quiet, busy)
        check(db.conn, rows + last, {"quiet", "busy"})
    finally:
        db.close()


def _gap_triggers(db: Database) -> list[tuple[str, str]]:
    return sorted(
        db.conn.execute("SELECT name, sql FROM sqlite_master WHERE name LIKE 'report_rollup_gaps%'")
    )


def test_a_log_at_step_15_gets_the_one_seek_triggers(tmp_path: Path) -> None:
    """Schema step 16 replaces the gap triggers of an existing log with today's, rollup kept."""
    path = tmp_path / "log.db"
    db = open_log(path)
    fresh = _gap_triggers(db)
    rows = [_row(f"s-{i}", T0 + i * 200.0, "k1", "m", "f1") for i in range(30)]
    both = "r.started_at >= x.hour * 3600 - 1 AND r.started_at < (x.hour + 1) * 3600 + 1"
    with db.conn:
        db.table("requests").insert_all(rows)
        for name, sql in fresh:  # step 15's triggers: both bounds of the hour on each side
            db.conn.execute(f"DROP TRIGGER {name}")
            sql = sql.replace("r.started_at >= x.hour * 3600 - 1 AND CAST", both + " AND CAST")
            db.conn.execute(sql.replace("r.started_at < (x.hour + 1) * 3600 + 1 AND CAST",
                                        both + " AND CAST"))  # fmt: skip
        db.conn.execute("DELETE FROM schema_version WHERE version >= 16")  # a log at step 15
    old = _gap_triggers(db)
    kept = stored_hours(db.conn, {"f1"})
    db.close()
    assert old != fresh
    db = open_log(path)
    try:
        now = _gap_triggers(db)
        assert now == fresh
        assert stored_hours(db.conn, {"f1"}) == kept == expected_hours(rows)
    finally:
        db.close()
