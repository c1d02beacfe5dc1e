"""The proxy's log writer on a real Postgres server (pg_server.py): batches survive a lost
connection and a server away for seconds (kept queued, ``/healthz`` degraded meanwhile), a stop
while it is away counts what it could not write, a row the server refuses costs only itself,
and two stores starting at once migrate once."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from fleet import wait_for
from proxy_support import mock_config
from servers import ServerThread

from promptcache.errors import StoreError
from promptcache.proxy.app import build_app
from promptcache.proxy.record import RequestRecord
from promptcache.proxy.store import SCHEMA_VERSION, RequestStore, open_log
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


def refuse_connections(url: str, refuse: bool) -> None:
    """Make the log's database refuse new connections (and end the open ones), or take them
    again: the server restarting or down, as the proxy's writer sees it."""
    dbname = url.rsplit("/", 1)[1]
    admin(url, f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS {'false' if refuse else 'true'}")
    if refuse:
        admin(
            url,
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{dbname}'",
        )


def test_a_server_away_for_seconds_loses_no_row(pg_url: str) -> None:
    # the writer gave a batch up after 5 tries, one per flush interval: 2.5 s at the default
    # 0.5 s, so a Postgres restart of a few seconds cost every row answered meanwhile
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        store.submit(row())
        assert store.flush(30)
        refuse_connections(pg_url, True)
        waiting = [row() for _ in range(7)]
        for values in waiting:
            store.submit(values)
        wait_for(lambda: store.failing_since is not None, "a failed write", 30)
        time.sleep(2.0)  # 40 flush intervals
        assert store.failing_since is not None
        assert (store.failed_rows, store.last_loss_at) == (0, None)
        refuse_connections(pg_url, False)
        assert store.flush(30)
        assert store.failing_since is None
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows, store.dropped_rows) == (8, 0, 0)
    assert count(pg_url) == 8


def test_a_stop_while_the_server_is_away_counts_the_rows_it_could_not_write(pg_url: str) -> None:
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        refuse_connections(pg_url, True)
        for _ in range(3):
            store.submit(row())
        started = time.monotonic()
        store.close(timeout_s=3)
        took = time.monotonic() - started
    finally:
        refuse_connections(pg_url, False)
    assert 1 < took < 3, took  # tried until the stop's time was nearly out, then ended
    assert store.failed_rows == 3 and store.last_loss_at is not None
    assert count(pg_url) == 0


def test_healthz_is_degraded_while_the_log_server_is_away(
    pg_url: str, mock_server: ServerThread
) -> None:
    app = build_app(mock_config(mock_server.url, pg_url))  # type: ignore[arg-type]
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    with ServerThread(app) as proxy:
        assert httpx.get(proxy.url + "/healthz").json()["status"] == "ok"
        refuse_connections(pg_url, True)
        try:
            for _ in range(3):
                answer = httpx.post(proxy.url + "/v1/chat/completions", json=chat)
                assert answer.status_code == 200, answer.text
            deadline = time.monotonic() + 10
            while httpx.get(proxy.url + "/healthz").json()["status"] != "degraded":
                assert time.monotonic() < deadline, "/healthz never said degraded"
                time.sleep(0.05)
            time.sleep(1.0)  # past the former 5 tries at this proxy's 0.05 s flush interval
            health = httpx.get(proxy.url + "/healthz").json()
            assert health == {"status": "degraded", "writer_queue": 3, "log_rows_dropped": 0}
            # the loss counter's help spoke of 'the log file' and 'SQLite' on a Postgres log
            scraped = httpx.get(proxy.url + "/metrics").text
            help_line = next(
                line
                for line in scraped.splitlines()
                if line.startswith("# HELP promptcache_log_rows_dropped_total")
            )
            assert "SQLite" not in help_line and "log file" not in help_line, help_line
        finally:
            refuse_connections(pg_url, False)
        assert app.state.store.flush(30)
        assert httpx.get(proxy.url + "/healthz").json() == {
            "status": "ok",
            "writer_queue": 0,
            "log_rows_dropped": 0,
        }
    assert count(pg_url) == 3


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


class Relay:
    """A TCP relay on 127.0.0.1 in front of the Postgres server; ``cut()`` closes every
    relayed connection at once, as a server that dies without a word does (no error message
    from it: libpq says the server closed the connection unexpectedly)."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> None:
        with self.lock:
            cut, self.sockets = self.sockets, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        self.cut()


def test_a_server_gone_without_a_word_is_one_warning_line(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # libpq's message for it spans three lines ('server closed the connection unexpectedly',
    # then a tab-indented hint), which the writer's warning printed as they were: one log
    # record in three lines, the last two without the 'request log:' that says whose they are
    parts = urllib.parse.urlsplit(pg_url)
    relay = Relay(parts.port or 5432)
    url = pg_url.replace(f":{parts.port}/", f":{relay.port}/")
    store = RequestStore(url, flush_interval_s=0.1)
    store.start()
    try:
        assert store.submit(row())
        assert store.flush(30)
        relay.cut()
        assert store.submit(row())
        assert store.flush(30)
    finally:
        store.close()
        relay.close()
    assert (store.written_rows, store.failed_rows, count(pg_url)) == (2, 0, 2)
    failed = [r.getMessage() for r in caplog.records if "writing 1 row failed" in r.getMessage()]
    assert len(failed) == 1, caplog.text
    assert "server closed the connection unexpectedly" in failed[0]
    assert "\n" not in failed[0] and "\t" not in failed[0], failed[0]
    assert "; it stays queued and tried again every 0.1 s until the server takes it" in failed[0]


def read_only(url: str, on: bool) -> None:
    """Make the log's database take no writes (as a hot standby, or a failover not promoted
    yet: SQLSTATE 25006), or writes again; its open sessions are ended so new ones see it."""
    dbname = url.rsplit("/", 1)[1]
    admin(
        url, f"ALTER DATABASE {dbname} SET default_transaction_read_only = {'on' if on else 'off'}"
    )
    admin(url, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{dbname}'")


def test_a_server_that_takes_no_writes_for_a_while_loses_no_row(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # 'cannot execute COPY FROM in a read-only transaction' was taken for a fault of the rows:
    # each was written alone, refused, and lost with an error line of its own, then 'writing
    # again ...; no row lost'; and the session stayed read-only after the server took writes
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        store.submit(row())
        assert store.flush(30)
        read_only(pg_url, True)
        for _ in range(5):
            store.submit(row())
        wait_for(lambda: store.failing_since is not None, "a failed write", 30)
        time.sleep(1.0)  # 20 flush intervals
        assert (store.failed_rows, store.last_loss_at) == (0, None)
        assert store.failing_since is not None
        read_only(pg_url, False)
        assert store.flush(30)
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows, count(pg_url)) == (6, 0, 6)
    messages = [r.getMessage() for r in caplog.records]
    assert not any("could not be written" in m for m in messages), messages
    assert messages[-1].endswith("of failed writes; no row lost"), messages


def test_writing_again_counts_the_rows_the_server_refused_meanwhile(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the first write after a spell of failures refused a row for its data (lost, logged with
    # its id), and the next line said 'writing again after 1 s of failed writes; no row lost'
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        store.submit(row())
        assert store.flush(30)
        refuse_connections(pg_url, True)
        store.submit(row())
        store.submit(row(status="not a status"))  # INTEGER column: the server refuses it
        wait_for(lambda: store.failing_since is not None, "a failed write", 30)
        time.sleep(0.5)
        assert store.failing_since is not None
        refuse_connections(pg_url, False)
        assert store.flush(30)
    finally:
        store.close()
    assert (store.written_rows, store.failed_rows, count(pg_url)) == (2, 1, 2)
    again = [r.getMessage() for r in caplog.records if "writing again" in r.getMessage()]
    assert len(again) == 1 and again[0].endswith(
        "of failed writes; 1 row refused by the server (each logged above with its id)"
    ), again


def test_a_proxy_does_not_start_on_a_server_that_takes_no_writes(pg_url: str) -> None:
    # it started (the log was migrated already) and kept every row queued, the queue
    # overflowing in time; a report may still read such a server (a hot standby)
    from promptcache.proxy.report import build_report

    open_log(pg_url).close()
    read_only(pg_url, True)
    with pytest.raises(StoreError) as refused:
        RequestStore(pg_url)
    shown = pg_url.replace("postgres@", "***@")
    assert str(refused.value) == (
        f"the request log {shown} takes no writes (transaction_read_only is on: a hot standby, "
        "or default_transaction_read_only set for the database or user); give the URL of a "
        "server that takes writes (the primary)"
    )
    report = build_report(pg_url, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.requests == 0
    read_only(pg_url, False)
    RequestStore(pg_url).close()


def test_a_role_that_may_not_read_the_log_is_told_so_not_that_there_is_none(
    pg_url: str, tmp_path: Path
) -> None:
    # information_schema.tables lists only the tables a role has a privilege on, so `report`
    # and `log copy` told such a role 'holds no promptcache log; start `promptcache proxy
    # --db ...` first', about a log proxies were writing to
    from promptcache.proxy.log_copy import copy_log
    from promptcache.proxy.report import build_report

    open_log(pg_url).close()
    url = role_url(pg_url)  # no grant on the tables
    role = url.split("//", 1)[1].split("@", 1)[0]
    shown = pg_url.replace("postgres@", "***@")
    expected = (
        f"{shown} holds a promptcache log that role {role} may not read (permission denied "
        f"for table schema_version); grant it SELECT on the log's tables (GRANT SELECT ON ALL "
        f"TABLES IN SCHEMA public TO {role}), or give the URL of a role that may"
    )
    with pytest.raises(StoreError) as refused:
        build_report(url, since=time.time() - 3600, until=time.time() + 60)
    assert str(refused.value) == expected
    with pytest.raises(StoreError) as refused:
        copy_log(url, tmp_path / "copy.db")
    assert str(refused.value) == expected
    reader = role_url(pg_url, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    assert (
        build_report(reader, since=time.time() - 3600, until=time.time() + 60).total.requests == 0
    )


def _stop_while_the_server_is_away(pg_url: str, rows: int) -> tuple[RequestStore, list[str]]:
    """A store that took ``rows`` new rows and was closed while the server refused connections;
    with the rows' ids, in the order submitted."""
    store = RequestStore(pg_url, flush_interval_s=0.05)
    store.start()
    try:
        refuse_connections(pg_url, True)
        ids = [uuid.uuid4().hex for _ in range(rows)]
        for row_id in ids:
            assert store.submit(row(id=row_id))
        store.close(timeout_s=3)
    finally:
        refuse_connections(pg_url, False)
    return store, ids


def test_a_stop_while_the_server_is_away_says_every_lost_row_in_one_line(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # more rows than one batch (500): one error line counts them all, not one line per batch
    store, ids = _stop_while_the_server_is_away(pg_url, 1_200)
    lines = [r.getMessage() for r in caplog.records if "lost at the stop" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"request log: 1200 rows lost at the stop (ids {ids[0]}, {ids[1]}, {ids[2]}...): "
    )
    assert store.failed_rows == 1_200 and count(pg_url) == 0


def test_a_stop_that_loses_few_rows_names_them_all_without_an_ellipsis(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, ids = _stop_while_the_server_is_away(pg_url, 2)
    assert f"request log: 2 rows lost at the stop (ids {ids[0]}, {ids[1]}): " in caplog.text
