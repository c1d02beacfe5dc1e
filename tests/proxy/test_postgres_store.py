"""The proxy's log writer on a real Postgres server (pg_server.py): batches survive a lost
connection, a server that stays away costs the batch after its tries (counted), a row the
server refuses costs only itself, and two stores starting at once migrate once."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from promptcache.errors import StoreError
from promptcache.proxy.record import RequestRecord
from promptcache.proxy.store import SCHEMA_VERSION, WRITE_ATTEMPTS, RequestStore, open_log
from promptcache.proxy.store_postgres import PgConnection


def row(**fields: object) -> dict[str, object]:
    values = RequestRecord(id=uuid.uuid4().hex, started_at=1_764_493_200.0, status=200).as_row()
    values.update(fields)
    return values


def count(url: str) -> int:
    with PgConnection(url) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0])


def admin(url: str, sql: str) -> None:
    """Run ``sql`` on the server's maintenance database (not the log's)."""
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(sql.encode())


def test_a_lost_connection_is_retried_without_losing_rows(pg_url: str) -> None:
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        for _ in range(50):
            store.submit(row())
        assert store.flush(30)
        dbname = pg_url.rsplit("/", 1)[1]
        admin(
            pg_url,
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{dbname}'",
        )
        for _ in range(50):
            store.submit(row())
        assert store.flush(30)
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows, store.dropped_rows) == (100, 0, 0)
    assert count(pg_url) == 100


def test_a_server_that_stays_away_costs_the_batch_after_its_tries(pg_url: str) -> None:
    dbname = pg_url.rsplit("/", 1)[1]
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        store.submit(row())
        assert store.flush(30)
        admin(pg_url, f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS false")
        admin(
            pg_url,
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{dbname}'",
        )
        lost = [row() for _ in range(7)]
        for values in lost:
            store.submit(values)
        assert store.flush(60)
        assert store.failed_rows == 7 and store.last_loss_at is not None
        admin(pg_url, f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS true")
        store.submit(row())
        assert store.flush(30)
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows) == (2, 7)
    assert count(pg_url) == 2
    assert WRITE_ATTEMPTS > 1  # retried before being counted


def test_a_row_the_server_refuses_loses_only_itself(pg_url: str) -> None:
    store = RequestStore(pg_url, flush_interval_s=5)
    store.start()
    good = [row() for _ in range(5)]
    nul = row(response_body='{"text": "a\x00b"}')  # a NUL character: valid JSON text
    bad = row(status="not a number")
    try:
        for values in [*good[:2], nul, bad, *good[2:]]:
            store.submit(values)
        assert store.flush(30)
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows) == (6, 1)
    with PgConnection(pg_url) as conn:
        ids = {r[0] for r in conn.execute("SELECT id FROM requests")}
        body = conn.execute("SELECT response_body FROM requests WHERE id = ?", (nul["id"],))
        stored = body.fetchone()[0]
    assert ids == {v["id"] for v in [*good, nul]}
    assert stored == '{"text": "a\\u0000b"}'


def test_two_stores_starting_at_once_migrate_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            open_log(pg_url).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    with PgConnection(pg_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY 1")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def tables(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            b"SELECT table_name FROM information_schema.tables"
            b" WHERE table_schema = current_schema() ORDER BY table_name"
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_another_programs_requests_table_is_refused_and_left_as_it_was(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"CREATE TABLE requests (id TEXT PRIMARY KEY, placed_at DOUBLE PRECISION)")
        conn.execute(b"INSERT INTO requests VALUES ('order-1', 1.0)")
    for _ in range(2):  # a second try meets the same database, not one half-migrated
        with pytest.raises(StoreError) as refused:
            open_log(pg_url)
        assert "is not a promptcache request log" in str(refused.value)
        assert "same names (requests)" in str(refused.value)
        assert "left as it was" in str(refused.value)
        assert tables(pg_url) == ["requests"]
    # the same table under a half-migrated log's empty schema_version: still refused
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    with pytest.raises(StoreError, match="same names"):
        open_log(pg_url)


def test_another_programs_tables_under_other_names_share_the_schema(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(b"CREATE TABLE orders (id TEXT PRIMARY KEY)")
        conn.execute(b"INSERT INTO orders VALUES ('order-1')")
    db = open_log(pg_url)
    db.close()
    assert {"orders", "requests", "schema_version"} <= set(tables(pg_url))
    db = open_log(pg_url)  # and a migrated log opens again
    db.close()
    with PgConnection(pg_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 1
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        assert version == SCHEMA_VERSION


def role_url(pg_url: str, *grants: str) -> str:
    """A new login role on the log's database with ``grants`` (and no CREATE on its schema);
    its URL."""
    role = f"proxy_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN".encode())
        conn.execute(b"REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}".encode())
        for grant in grants:
            conn.execute(grant.format(role=role).encode())
    return pg_url.replace("postgres@", f"{role}@", 1)


def test_a_role_that_only_writes_rows_logs_to_a_migrated_log(pg_url: str) -> None:
    open_log(pg_url).close()  # the first start, by a role with CREATE
    url = role_url(
        pg_url, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"
    )
    store = RequestStore(url, flush_interval_s=0.05)
    store.start()
    try:
        for _ in range(20):
            assert store.submit(row())
        assert store.flush(30)
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows, store.dropped_rows) == (20, 0, 0)
    assert count(pg_url) == 20


def test_a_role_without_create_cannot_make_the_first_start(pg_url: str) -> None:
    url = role_url(pg_url)
    with pytest.raises(StoreError) as refused:
        open_log(url)
    shown = url.split("@", 1)[1]
    assert str(refused.value) == (
        f"the request log postgresql://***@{shown} refused a statement: "
        "permission denied for schema public"
    )
    assert tables(pg_url) == []


def test_a_stop_that_cannot_write_in_time_says_how_many_rows_it_loses(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    with psycopg.connect(pg_url) as holder:  # another session holds the table
        holder.execute(b"LOCK TABLE requests IN ACCESS EXCLUSIVE MODE")
        for _ in range(7):
            assert store.submit(row())
        store.close(timeout_s=1)
        holder.rollback()
    assert "did not finish within 1 s: 7 rows not written" in caplog.text
    assert "they are lost when the process exits" in caplog.text


def test_a_stop_that_writes_in_time_reports_nothing_lost(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    for _ in range(7):
        assert store.submit(row())
    store.close(timeout_s=30)
    assert "did not finish" not in caplog.text
    assert (store.written_rows, count(pg_url)) == (7, 7)
