"""`promptcache proxy`: refuses unsafe or incomplete settings, serves, and drains on Ctrl-C."""

from __future__ import annotations

import dataclasses
import logging
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from port_support import free_ports
from proxy_support import read_rows, wait_until_serving
from servers import ServerThread
from slow_client_support import SlowClients, limit_open_files
from upstreams import MockUpstream

from promptcache.cli import cli
from promptcache.proxy.config import config_for_upstream
from promptcache.proxy.serve import _warn_unreachable


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0", "--upstream", "openai"], "--auth-token"),
        ([], "give --upstream NAME|URL or --config FILE"),
        (["--upstream", "antropic"], "is neither one of anthropic"),
        (["--upstream", "openai", "--auth-token", "tok123"], "openssl rand -hex 32"),
        (["--upstream", "http://user:pw@127.0.0.1:99999"], "invalid port"),
        (
            ["--upstream", "anthropic,openai"],
            "--upstream 'anthropic,openai' lists 'anthropic', a built-in upstream: a "
            "comma-separated --upstream lists base URLs of replicas of one server",
        ),
        (
            [
                "--upstream",
                "http://127.0.0.1:1,http://127.0.0.1:2",
                "--routing-policy",
                "kv_events",
            ],
            "--routing-policy kv_events needs each replica's kv_events_endpoints and the "
            "tokenizer, which only a config file holds",
        ),
        (["--host", "not a host", "--upstream", "openai"], "is an unknown host"),
        (
            ["--host", "not a host", "--upstream", "openai", "--auth-token", "0123456789abcdef"],
            "is an unknown host",
        ),
    ],
)
def test_bad_settings_exit_2_with_a_message(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["proxy", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert "user:pw" not in result.output
    if "not a host" in args:  # a typo, not a reason to ask for a token
        assert "API keys" not in result.output
    assert "promptcache proxy on" not in result.output  # refused before the banner


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_bytes(b"\xff\xfe")
    result = CliRunner().invoke(cli, ["proxy", "--config", str(config)])
    assert result.exit_code == 2
    assert "c.toml is not UTF-8 text" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("db", "message"),
    [
        # the words of lint, report, check and log copy, then the option to change
        ("missing/dir/x.db", "missing/dir does not exist; pick another --db"),
        ("notsqlite.db", "notsqlite.db is not a SQLite file"),
        # a file where the folder should be: not "folder .../notsqlite.db does not exist"
        ("notsqlite.db/x.db", "notsqlite.db is not a folder; pick another --db"),
        ("notsqlite.db/sub/x.db", "notsqlite.db is not a folder; pick another --db"),
    ],
)
def test_a_bad_db_is_refused_before_the_banner(tmp_path: Path, db: str, message: str) -> None:
    (tmp_path / "notsqlite.db").write_text("just some text, not a database\n")
    args = ["proxy", "--upstream", "openai", "--port", str(free_port()), "--db", str(tmp_path / db)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "promptcache proxy on" not in result.output
    assert "Traceback" not in result.output


def test_another_programs_sqlite_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    with sqlite3.connect(app) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    conn.close()
    before = app.read_bytes()
    args = ["proxy", "--upstream", "openai", "--port", str(free_port()), "--db", str(app)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"error: {app} is a SQLite database but not a promptcache request log (its tables: "
        "users); it was left as it was: give a new file or a log promptcache wrote\n"
    )
    assert app.read_bytes() == before
    assert not Path(f"{app}-wal").exists()


def test_a_kv_events_chat_template_that_is_no_file_and_no_template(tmp_path: Path) -> None:
    # a mistyped path was taken as the template's text: every prompt tokenised as that path
    tokenizer = (
        Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
    )
    config = tmp_path / "fleet.toml"
    config.write_text(
        'default_upstream = "fleet"\n[upstreams.fleet]\n'
        'replicas = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]\npolicy = "kv_events"\n'
        'kv_events_endpoints = ["tcp://127.0.0.1:5557", "tcp://127.0.0.1:5567"]\n'
        f'tokenizer = "{tokenizer}"\nchat_template = "templates/chat.jinja"\n',
        encoding="utf-8",
    )
    args = ["proxy", "--config", str(config), "--port", str(free_port()), "--no-log"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output == (
        "error: chat_template 'templates/chat.jinja' is neither a file (a relative path is read "
        "from the proxy's working directory) nor Jinja template text; give the replicas' "
        "--chat-template file\n"
    )


def test_bad_config_file_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "proxy.toml"
    config.write_text("[[routes]]\nupstream = 'openai'\n")
    result = CliRunner().invoke(cli, ["proxy", "--config", str(config)])
    assert result.exit_code == 2
    assert "routes[0] needs path_prefix or model_prefix" in result.output


def test_a_port_in_use_is_one_line_before_the_log_opens(tmp_path: Path) -> None:
    db_path = tmp_path / "log.db"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        result = CliRunner().invoke(
            cli, ["proxy", "--upstream", "openai", "--port", port, "--db", str(db_path)]
        )
    assert result.exit_code == 2, result.output
    assert f"cannot listen on 127.0.0.1:{port}: the address is already in use" in result.output
    assert "Traceback" not in result.output
    assert not db_path.exists()  # bound first, so nothing was created


def test_help_and_docs_say_the_log_may_be_postgres() -> None:
    # --help said rows go to "the SQLite --db file" and docs/proxy.md's --db row "the SQLite
    # log", though --db takes a postgresql:// URL as well
    result = CliRunner().invoke(cli, ["proxy", "--help"])
    assert result.exit_code == 0, result.output
    description = " ".join(result.output.split("Example:")[0].split())
    assert "SQLite --db file" not in description
    assert (
        "recorded in the --db log: a SQLite file, or a Postgres database given as a "
        "postgresql:// URL." in description
    )
    docs = Path(__file__).parents[2] / "docs" / "proxy.md"
    db_rows = [ln for ln in docs.read_text().splitlines() if ln.startswith("| `--db ")]
    assert len(db_rows) == 1
    assert "a SQLite file" in db_rows[0] and "postgresql://" in db_rows[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serves_and_a_clean_stop_writes_every_row(
    tmp_path: Path, mock_server: ServerThread
) -> None:
    port, db = free_port(), tmp_path / "cli.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from promptcache.cli import main; main()",
            "proxy",
            "--upstream",
            mock_server.url,
            "--port",
            str(port),
            "--db",
            str(db),
            "--log-level",
            "warning",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url + "/nothing-here")
        for _ in range(5):
            reply = httpx.post(
                url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": []}
            )
            assert reply.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert f"promptcache proxy on {url} -> {mock_server.url}" in stderr
    rows = read_rows(db)
    assert len(rows) == 5  # flush interval is 0.5 s; a clean stop drained the rest
    assert {r["vendor"] for r in rows} == {"openai_compatible"}
    assert {r["cache_read_tokens"] for r in rows} == {1920}


def test_an_upstream_that_refuses_is_warned_about_at_start_and_at_the_first_refusal(
    tmp_path: Path,
) -> None:
    # nothing listens on the upstream's port: the proxy starts anyway, says so, answers 502,
    # and logs the first refused request (not every one) at the default log level
    port, down_port = free_ports(2)
    down = f"http://127.0.0.1:{down_port}"
    command = [
        sys.executable, "-c", "from promptcache.cli import main; main()",
        "proxy", "--upstream", down, "--port", str(port), "--db", str(tmp_path / "l.db"),
    ]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url + "/healthz")
        for _ in range(3):
            reply = httpx.post(
                url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": []}
            )
            assert reply.status_code == 502
            assert "custom" not in reply.text
            message = reply.json()["error"]["message"]
            # the address and the OS's reason; no "ssl:" (a plain http:// upstream)
            assert message.startswith(
                f"upstream {down} refused the connection or could not be reached: "
                f"cannot connect to 127.0.0.1:{down.rsplit(':', 1)[1]}: [Errno 111] "
            ), message
            assert "ssl" not in message
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    lines = stderr.splitlines()
    assert lines[0] == f"promptcache proxy on {url} -> {down}, recording to {tmp_path / 'l.db'}"
    start = [ln for ln in lines if "is not reachable" in ln]
    assert start == [
        f"WARNING:  upstream {down} is not reachable (connection refused); requests to it get "
        "502 until it is"
    ]
    refused = [ln for ln in lines if "refused the connection" in ln]
    assert len(refused) == 1, stderr  # the first of the 3 refusals only
    assert refused[0].startswith(f"WARNING:  upstream {down} refused the connection")
    assert refused[0].endswith("clients get 502 until it answers (logged once until then)")
    assert "custom" not in stderr and "Traceback" not in stderr


def test_an_upstream_that_closes_without_a_response_is_told_in_one_sentence(
    tmp_path: Path,
) -> None:
    # the upstream takes the connection, reads the request and closes it without a byte: the
    # warning read "...without sending a response.; clients get 502" (httpx's period kept)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def close_every_connection() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk

    thread = threading.Thread(target=close_every_connection, daemon=True)
    thread.start()
    port, upstream = free_port(), f"http://127.0.0.1:{listener.getsockname()[1]}"
    command = [
        sys.executable, "-c", "from promptcache.cli import main; main()",
        "proxy", "--upstream", upstream, "--port", str(port), "--db", str(tmp_path / "l.db"),
    ]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url + "/healthz")
        reply = httpx.post(url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": []})
        assert reply.status_code == 502
        assert reply.json()["error"]["message"] == (
            f"upstream {upstream} broke the HTTP protocol: Server disconnected without sending "
            "a response"
        )
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        stop.set()
        thread.join(5)
        listener.close()
    assert proc.returncode == 0, stderr
    broke = [ln for ln in stderr.splitlines() if "broke the HTTP protocol" in ln]
    assert broke == [
        f"WARNING:  upstream {upstream} broke the HTTP protocol: Server disconnected without "
        "sending a response; clients get 502 until it answers (logged once until then)"
    ], stderr


def test_an_engine_upstream_that_is_not_running_says_how_to_start_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # `--upstream engine` before `promptcache engine serve`: the warning named the address only
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    engine = dataclasses.replace(
        config_for_upstream("engine", db_path=None).upstreams["engine"],
        url=f"http://127.0.0.1:{port}",
    )
    config = config_for_upstream(engine, db_path=None)
    with caplog.at_level(logging.WARNING, logger="promptcache.proxy"):
        _warn_unreachable(config)
    assert [r.getMessage() for r in caplog.records] == [
        f"upstream engine (http://127.0.0.1:{port}) is not reachable (connection refused); "
        "requests to it get 502 until it is (start it: promptcache engine serve --model PATH "
        f"--port {port})"
    ]


def test_sigterm_after_the_grace_period_prints_one_line_per_cancelled_request(
    tmp_path: Path, mock_server: ServerThread
) -> None:
    # two requests still running when SIGTERM comes: a stream the upstream never ends (its
    # response has started) and an answer the upstream sends after 3 s (not started); the grace
    # is 0.5 s, so both are cancelled, each told in one line, both rows written
    upstream = mock_server.app
    assert isinstance(upstream, MockUpstream)
    upstream.reset()
    port, db = free_port(), tmp_path / "cli.db"
    command = [
        sys.executable, "-c", "from promptcache.cli import main; main()",
        "proxy", "--upstream", mock_server.url, "--port", str(port), "--db", str(db),
        "--shutdown-timeout", "0.5",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    outcomes: list[str] = []

    def call(fault: str, stream: bool) -> None:
        body = {"model": "gpt-4o", "messages": [], "stream": stream}
        try:
            with httpx.stream(
                "POST", url + "/v1/chat/completions", json=body,
                headers={"x-mock-fault": fault}, timeout=60,
            ) as reply:  # fmt: skip
                for _ in reply.iter_bytes():
                    pass
            outcomes.append(f"{fault}: {reply.status_code}")
        except httpx.TransportError as exc:
            outcomes.append(f"{fault}: {type(exc).__name__}")

    try:
        wait_until_serving(proc, url + "/healthz")
        threads = [
            threading.Thread(target=call, args=("hang", True)),
            threading.Thread(target=call, args=("slow", False)),
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while len(upstream.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(upstream.requests) == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    for thread in threads:
        thread.join(30)
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    cancelled = sorted(ln for ln in stderr.splitlines() if "cancelled at shutdown" in ln)
    assert len(cancelled) == 2, stderr
    assert all(
        ln.startswith("WARNING:  request POST /v1/chat/completions from 127.0.0.1:")
        for ln in cancelled
    )
    endings = sorted(ln.rsplit(" cancelled at shutdown ", 1)[1] for ln in cancelled)
    assert endings == [
        "after the 0.5 s grace (no response had started: answered 503)",
        "after the 0.5 s grace (status 200 sent, body cut)",
    ]
    # the unanswered one is told in JSON its SDK reads, not uvicorn's plain-text 500 (a bug)
    assert sorted(outcomes)[1:] == ["slow: 503"], outcomes
    assert len(outcomes) == 2
    rows = read_rows(db)
    assert len(rows) == 2 and all("cancelled" in (r["error"] or "") for r in rows)


def answer_before_close(port: int, request: bytes) -> bytes:
    """Send ``request`` on a new connection and read until the server closes it (at most 20 s,
    else the test fails)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_slow_clients_cannot_hold_the_proxys_connections(mock_server: ServerThread) -> None:
    # 300 connections sending a request head a byte per 0.1 s, against a proxy allowed 256 open
    # files: without head timeouts and a connection limit they would hold every descriptor and
    # no real request would be accepted
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-c", "from promptcache.cli import main; main()",
        "proxy", "--upstream", mock_server.url, "--port", str(port), "--no-log",
        "--header-timeout", "2", "--body-timeout", "1", "--keep-alive-timeout", "1",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, preexec_fn=limit_open_files(256)
    )
    try:
        wait_until_serving(proc, url + "/healthz")
        # a body that stops short, a head past 64 KiB, an idle kept-alive connection
        short_body = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{}"
        )
        assert answer_before_close(port, short_body).startswith(b"HTTP/1.1 408 ")
        huge_head = b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 70_000
        assert answer_before_close(port, huge_head).startswith(b"HTTP/1.1 431 ")
        idle = answer_before_close(port, b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        assert idle.startswith(b"HTTP/1.1 200 ") and idle.count(b"HTTP/1.1") == 1
        with SlowClients(port, 300, interval_s=0.1, duration_s=40) as slow:
            for _ in range(5):
                reply = httpx.post(
                    url + "/v1/chat/completions",
                    json={"model": "gpt-4o", "messages": []},
                    timeout=10,
                )
                assert reply.status_code == 200
            assert slow.wait_all_closed(30), f"{slow.open_count()} slow connections still open"
            answers = list(slow.closed.values())
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    # the ones still waiting after 2 s were told why; the rest made room for newer connections
    timed_out = [a for a in answers if a.startswith(b"HTTP/1.1 408 Request Timeout\r\n")]
    assert timed_out and all(a in (b"", timed_out[0]) for a in answers)
    assert "closed a connection that sent no complete request head within 2 s" in stderr
    assert "connections open (--max-client-connections): closed the one waiting longest" in stderr


def test_replicas_given_as_urls_are_named_by_url_in_warnings(tmp_path: Path) -> None:
    port, *down_ports = free_ports(3)
    down = [f"http://127.0.0.1:{p}" for p in down_ports]
    command = [
        sys.executable, "-c", "from promptcache.cli import main; main()",
        "proxy", "--upstream", ",".join(down), "--port", str(port), "--no-log",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url + "/healthz")
        reply = httpx.post(url + "/v1/chat/completions", json={"model": "m", "messages": []})
        assert reply.status_code == 502 and "custom" not in reply.text
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    for replica in down:
        assert f"upstream {replica} is not reachable (connection refused)" in stderr
    for replica in down:  # by health check or by the refused request, whichever came first
        assert f"WARNING:  replica {replica} out of rotation: " in stderr
    assert "custom" not in stderr and "Traceback" not in stderr
