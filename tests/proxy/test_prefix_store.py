"""``--store-prefixes``: one representative request body per prefix family, redacted, ranked
by the report's per-family cost (``proxy/prefix_store.py``).

Requests go through a live proxy to the mock upstream; what was stored is read back from the
SQLite file with plain ``sqlite3``, and the ranking is checked against costs summed here from
the logged rows.
"""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from fleet import wait_for
from proxy_support import RunningProxy, wait_until_serving
from servers import ServerThread

from promptcache.cli import cli
from promptcache.errors import ConfigError, StoreError
from promptcache.proxy.config import config_from_dict
from promptcache.proxy.prefix_store import PREFIX_TABLE, costliest_prefixes
from promptcache.proxy.store import open_log

OPENAI_KEY = "sk-proj-" + "Qq7Ww6Ee" * 6
AUTH_TOKEN = "proxy-auth-token-0123456789"
TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
SYSTEMS = {
    "ledger": "You are the ledger assistant of Acme. Answer with the account's balance first.",
    "poems": "You write short poems about the sea. Four lines, no title, no rhyme scheme.",
    "triage": "You triage bug reports for the billing service and name the owning team.",
}


def _chat(proxy: RunningProxy, system: str, user: str, **headers: str) -> httpx.Response:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    return httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {OPENAI_KEY}", **headers},
        timeout=10,
    )


def _stored(path: Path) -> list[dict[str, object]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {PREFIX_TABLE} ORDER BY body")]
    finally:
        conn.close()


def test_the_latest_successful_body_of_each_family_is_kept_redacted(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy(store_prefixes=True, auth_token=AUTH_TOKEN)
    auth = {"x-promptcache-auth": AUTH_TOKEN}
    secret_user = f"my key is {OPENAI_KEY} and the proxy token is {AUTH_TOKEN}; balance?"
    assert _chat(proxy, SYSTEMS["ledger"], "What is my balance?", **auth).status_code == 200
    assert _chat(proxy, SYSTEMS["ledger"], secret_user, **auth).status_code == 200
    assert _chat(proxy, SYSTEMS["poems"], "The tide at dawn.", **auth).status_code == 200
    # a failed request is never a family's representative, even when it is the latest
    failed = _chat(proxy, SYSTEMS["poems"], "Storm.", **auth, **{"x-mock-fault": "status-500"})
    assert failed.status_code == 500
    rows = proxy.rows(4)
    proxy.server.stop()  # the lifespan's end writes what is waiting
    stored = _stored(proxy.db_path)
    assert len(stored) == 2
    by_system = {
        next(k for k, text in SYSTEMS.items() if text in str(row["body"])): row for row in stored
    }
    assert set(by_system) == {"ledger", "poems"}
    ledger, poems = by_system["ledger"], by_system["poems"]
    # the latest request of the ledger family, redacted: neither secret survives
    body = json.loads(str(ledger["body"]))
    assert body["messages"][1]["content"] == (
        "my key is [REDACTED] and the proxy token is [REDACTED]; balance?"
    )
    assert OPENAI_KEY not in str(ledger["body"]) and AUTH_TOKEN not in str(ledger["body"])
    assert ledger["request_id"] == rows[1]["id"]
    assert poems["request_id"] == rows[2]["id"]  # not the failed rows[3]
    for row, logged in ((ledger, rows[1]), (poems, rows[2])):
        assert row["prefix_family"] == logged["prefix_family"] is not None
        assert row["key_fingerprint"] == logged["key_fingerprint"]
        assert (row["model"], row["api"]) == ("gpt-4o", "openai_chat")
        assert row["started_at"] == logged["started_at"]


def test_without_the_flag_no_prompt_text_is_stored(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    assert _chat(proxy, SYSTEMS["triage"], "Invoices are doubled.").status_code == 200
    proxy.rows(1)
    proxy.server.stop()
    assert _stored(proxy.db_path) == []
    for path in proxy.db_path.parent.glob(proxy.db_path.name + "*"):  # the file, -wal, -shm
        data = path.read_bytes()
        assert b"Invoices are doubled" not in data and b"triage bug reports" not in data, path


def test_costliest_prefixes_rank_by_the_logged_cost(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy(store_prefixes=True)
    counts = {"ledger": 3, "poems": 1, "triage": 2}
    for name, count in counts.items():
        for i in range(count):
            assert _chat(proxy, SYSTEMS[name], f"question {i}").status_code == 200
    anthropic = httpx.post(
        f"{proxy.url}/v1/messages",
        json={
            "model": "claude-sonnet-4-5",
            "max_tokens": 8,
            "system": "You answer in French.",
            "messages": [{"role": "user", "content": "Bonjour"}],
        },
        headers={"x-api-key": "sk-ant-" + "k" * 20, "anthropic-version": "2023-06-01"},
        timeout=10,
    )
    assert anthropic.status_code == 200
    rows = proxy.rows(7)
    proxy.server.stop()
    # the cost of each family, summed here from the logged rows
    cost: dict[str, float] = {}
    for row in rows:
        cost[row["prefix_family"]] = cost.get(row["prefix_family"], 0.0) + float(row["cost_usd"])
    expected = sorted(cost, key=lambda family: -cost[family])
    conn = sqlite3.connect(proxy.db_path)
    try:
        every = costliest_prefixes(conn, None)
        top2 = costliest_prefixes(conn, 2, apis=["openai_chat"])
        only_gpt = costliest_prefixes(conn, None, models=["gpt-4o"])
    finally:
        conn.close()
    assert [p.prefix_family for p in every] == expected
    assert [p.cost_usd for p in every] == pytest.approx([cost[f] for f in expected])
    chat = [f for f in expected if any(r["prefix_family"] == f and r["api"] == "openai_chat"
                                       for r in rows)]  # fmt: skip
    assert [p.prefix_family for p in top2] == chat[:2]
    assert len(only_gpt) == 3 and {p.api for p in only_gpt} == {"openai_chat"}
    requests = {f: sum(r["prefix_family"] == f for r in rows) for f in cost}
    assert {p.prefix_family: p.requests for p in every} == requests
    assert sorted(requests.values()) == [1, 1, 2, 3]


def test_a_log_without_the_table_is_a_store_error(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "empty.db")
    try:
        with pytest.raises(StoreError, match="no prefix_bodies table"):
            costliest_prefixes(conn, 1)
    finally:
        conn.close()


def test_store_prefixes_needs_the_log_and_reads_from_the_config_file(tmp_path: Path) -> None:
    data = {"default_upstream": "openai", "store_prefixes": True}
    assert config_from_dict(data, source="x.toml", db_path=tmp_path / "a.db").store_prefixes
    with pytest.raises(ConfigError, match="store_prefixes must be true or false"):
        config_from_dict({"default_upstream": "openai", "store_prefixes": "yes"}, source="x")
    with pytest.raises(ConfigError, match="drop --no-log"):
        config_from_dict(data, source="x.toml", db_path=None)
    result = CliRunner().invoke(
        cli, ["proxy", "--upstream", "openai", "--no-log", "--store-prefixes"]
    )
    assert result.exit_code == 2, result.output
    assert "--store-prefixes keeps request bodies in the request log; drop --no-log" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_the_table_is_created_by_the_log_migration(
    tmp_path: Path,
) -> None:
    db = open_log(tmp_path / "log.db")
    try:
        columns = [c[1] for c in db.execute(f"PRAGMA table_info({PREFIX_TABLE})")]
    finally:
        db.close()
    assert columns == [
        "key_fingerprint", "model", "prefix_family", "api", "request_id", "started_at", "body"
    ]  # fmt: skip


def test_the_cli_flag_says_so_and_a_clean_stop_writes_the_bodies(
    tmp_path: Path, mock_server: ServerThread
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    db = tmp_path / "cli.db"
    command = [
        sys.executable, "-c", "from promptcache.cli import main; main()", "proxy",
        "--upstream", mock_server.url, "--port", str(port), "--db", str(db),
        "--store-prefixes", "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url + "/healthz")
        for name in ("ledger", "poems"):
            body = {"model": "gpt-4o", "messages": [{"role": "system", "content": SYSTEMS[name]}]}
            assert httpx.post(url + "/v1/chat/completions", json=body).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    banner = f"promptcache proxy on {url} -> {mock_server.url}, recording to {db}, "
    assert banner + "keeping one request body per prefix family" in stderr
    stored = _stored(db)
    assert [json.loads(str(r["body"]))["messages"][0]["content"] for r in stored] == [
        SYSTEMS["ledger"],
        SYSTEMS["poems"],
    ]


def test_a_postgres_log_keeps_and_ranks_the_bodies_too(
    start_proxy: Callable[..., RunningProxy], pg_url: str
) -> None:
    import psycopg

    from promptcache.proxy.report import connect_log

    proxy = start_proxy(db_path=pg_url, store_prefixes=True)
    for name, count in {"ledger": 2, "poems": 1}.items():
        for i in range(count):
            assert _chat(proxy, SYSTEMS[name], f"question {i}").status_code == 200
    proxy.server.stop()  # the lifespan's end writes the rows and the bodies
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT id, prefix_family, CAST(cost_usd AS DOUBLE PRECISION) FROM requests "
            "ORDER BY started_at"
        ).fetchall()
        stored = conn.execute(f"SELECT prefix_family, request_id, body FROM {PREFIX_TABLE}")
        bodies = {family: (request, body) for family, request, body in stored}
    assert len(rows) == 3
    cost: dict[str, float] = {}
    latest: dict[str, str] = {}
    for request_id, family, usd in rows:
        cost[family] = cost.get(family, 0.0) + usd
        latest[family] = request_id
    assert {family: request for family, (request, _) in bodies.items()} == latest
    assert "question 1" in bodies[rows[1][1]][1]
    log = connect_log(pg_url)
    try:
        ranked = costliest_prefixes(log, None, apis=["openai_chat"])
    finally:
        log.close()
    assert [p.prefix_family for p in ranked] == sorted(cost, key=lambda f: -cost[f])
    assert [p.cost_usd for p in ranked] == pytest.approx(sorted(cost.values(), reverse=True))
    # engine serve --warmup-from-log reads the same log by its URL
    from promptcache.engine.server.protocol import ServingContext
    from promptcache.engine.server.warmup import read_warmup_log
    from promptcache.engine.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(TINYSTORIES)
    tokenizer.set_chat_template("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    ctx = ServingContext(
        model_names=("gpt-4o",), tokenizer=tokenizer, max_model_len=512, vocab_size=2048
    )
    warmup = read_warmup_log(pg_url, 1, ctx)
    assert warmup.families == [ranked[0].prefix_family]
    messages = json.loads(bodies[ranked[0].prefix_family][1])["messages"]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert warmup.requests[0].prompts == [tokenizer.encode(text, add_special_tokens=False)]


def _refuse(url: str, refuse: bool) -> None:
    """The log's database refuses new connections (and ends the open ones), or takes them."""
    import psycopg

    dbname = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS {str(not refuse).lower()}")
        if refuse:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (dbname,),
            )


def test_a_postgres_server_away_is_one_warning_and_a_stop_counts_what_it_lost(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # each round (every flush interval, every 50 ms at a stop) logged '...; retrying': 267
    # warning lines for a 5 s outage and a stop, and the bodies a stop gave up were not counted
    import time

    from promptcache.proxy.prefix_store import PrefixStore

    def offer(store: PrefixStore, family: str) -> None:
        store.offer(
            key_fingerprint="k", model="m", prefix_family=family, api="openai_chat",
            request_id="r-" + family, started_at=time.time(), body=b"{}", secrets=(),
        )  # fmt: skip

    open_log(pg_url).close()
    store = PrefixStore(pg_url, flush_interval_s=0.02)
    store.start()
    with caplog.at_level("WARNING", logger="promptcache.proxy.prefix_store"):
        _refuse(pg_url, True)
        try:
            offer(store, "f1")
            wait_for(lambda: store.failing_since is not None, "a failed write", 30)
            time.sleep(1.0)  # 50 rounds
            assert store.failing_since is not None
        finally:
            _refuse(pg_url, False)
        deadline = time.monotonic() + 10
        while store.written_rows < 1:
            assert time.monotonic() < deadline, "the body was not written once the server was back"
            time.sleep(0.02)
        _refuse(pg_url, True)
        try:
            offer(store, "f2")
            offer(store, "f3")
            store.close(timeout_s=30)  # its flush gives up after 10 s
        finally:
            _refuse(pg_url, False)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines
    assert lines[0].startswith("prefix store: cannot connect to the request log ")
    assert lines[0].endswith("; the bodies stay queued and are tried again")
    assert lines[1].startswith("prefix store: writing again after ")
    assert lines[2].startswith("prefix store: cannot connect")
    assert lines[3] == (
        "prefix store: 2 bodies not written at the stop (the log did not take them; requests "
        "r-f2, r-f3...)"
    )
    assert (store.written_rows, store.failed_rows) == (1, 2)


def test_a_postgres_server_that_takes_no_writes_keeps_the_bodies(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # 'cannot execute INSERT in a read-only transaction' (a hot standby, a failover not
    # promoted yet) was taken for a fault of the bodies: they were dropped at once
    import time

    import psycopg

    from promptcache.proxy.prefix_store import PrefixStore

    open_log(pg_url).close()
    dbname = pg_url.rsplit("/", 1)[1]
    maintenance = pg_url.rsplit("/", 1)[0] + "/postgres"

    def read_only(on: bool) -> None:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(
                f"ALTER DATABASE {dbname} SET default_transaction_read_only = "
                f"{'on' if on else 'off'}".encode()
            )

    store = PrefixStore(pg_url, flush_interval_s=0.02)
    store.start()
    read_only(True)
    try:
        store.offer(
            key_fingerprint="k", model="m", prefix_family="f1", api="openai_chat",
            request_id="r-f1", started_at=time.time(), body=b"{}", secrets=(),
        )  # fmt: skip
        wait_for(lambda: store.failing_since is not None, "a failed write", 30)
        time.sleep(0.5)  # 25 rounds
        assert (store.written_rows, store.failed_rows) == (0, 0)
        assert store.failing_since is not None
    finally:
        read_only(False)
    store.close(timeout_s=30)
    assert (store.written_rows, store.failed_rows) == (1, 0)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(b"SELECT request_id FROM prefix_bodies").fetchall() == [("r-f1",)]
    assert "read-only transaction" in caplog.text


def test_a_postgres_commit_that_fails_for_the_server_keeps_the_bodies(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the upserts were checked for the server going away, not the commit after them: a
    # session ended there (a restart, a failover) raised psycopg's own error out of the
    # writer thread, which died with a traceback, and no body was written from then on
    import time

    import psycopg

    from promptcache.proxy.prefix_store import PrefixStore

    open_log(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # a check run at each commit, failing as a server shutting down does (57P01)
        conn.execute(
            b"CREATE FUNCTION at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            b"RAISE EXCEPTION 'terminating connection due to administrator command' "
            b"USING ERRCODE = '57P01'; END $$"
        )
        conn.execute(
            b"CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT OR UPDATE ON prefix_bodies "
            b"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit()"
        )
    store = PrefixStore(pg_url, flush_interval_s=0.02)
    store.start()
    try:
        store.offer(
            key_fingerprint="k", model="m", prefix_family="f1", api="openai_chat",
            request_id="r-f1", started_at=time.time(), body=b"{}", secrets=(),
        )  # fmt: skip
        wait_for(lambda: store.failing_since is not None, "a failed write", 30)
        time.sleep(0.5)  # 25 rounds
        assert (store.written_rows, store.failed_rows) == (0, 0)
        assert store.failing_since is not None
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(b"DROP TRIGGER at_commit ON prefix_bodies")
    store.offer(
        key_fingerprint="k", model="m", prefix_family="f2", api="openai_chat",
        request_id="r-f2", started_at=time.time(), body=b"{}", secrets=(),
    )  # fmt: skip
    store.close(timeout_s=30)
    assert (store.written_rows, store.failed_rows) == (2, 0)
    with psycopg.connect(pg_url) as conn:
        got = conn.execute(b"SELECT request_id FROM prefix_bodies ORDER BY 1").fetchall()
    assert got == [("r-f1",), ("r-f2",)]
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("prefix_store")]
    assert lines[0].startswith("prefix store: the request log postgresql://"), lines
    assert ": terminating connection due to administrator command" in lines[0]
    assert lines[0].endswith("; the bodies stay queued and are tried again"), lines
    assert "\n" not in lines[0]
