"""Credentials: fingerprints instead of keys, and redaction of stored bodies."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
from click.testing import CliRunner
from proxy_support import RunningProxy, wait_until_serving
from servers import ServerThread
from starlette.types import Receive, Scope, Send

from promptcache.cli import cli
from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.redact import (
    REDACTED,
    client_secrets,
    key_fingerprint,
    redact_text,
    redact_url,
)

ANTHROPIC_KEY = "sk-ant-api03-" + "A1b2C3d4" * 10
OPENAI_KEY = "sk-proj-" + "Zz9Yy8Xx" * 6
GOOGLE_KEY = "AIza" + "SyD-0123456789abcdefghijklmnopqrstu"


def test_secrets_come_from_every_vendor_key_header_and_the_query() -> None:
    headers = [
        (b"x-api-key", ANTHROPIC_KEY.encode()),
        (b"authorization", b"Bearer " + OPENAI_KEY.encode()),
        (b"x-goog-api-key", GOOGLE_KEY.encode()),
        (b"content-type", b"application/json"),
    ]
    assert client_secrets(headers, b"alt=sse&key=query-key-123") == [
        ANTHROPIC_KEY,
        OPENAI_KEY,
        GOOGLE_KEY,
        "query-key-123",
    ]
    assert client_secrets([(b"content-type", b"x")], b"alt=sse") == []


def test_fingerprint_is_salted_short_and_never_the_key() -> None:
    first = key_fingerprint([OPENAI_KEY], b"salt-a")
    assert first is not None and len(first) == 16
    assert first == key_fingerprint([OPENAI_KEY], b"salt-a")
    assert first != key_fingerprint([OPENAI_KEY], b"salt-b")
    assert first != key_fingerprint([ANTHROPIC_KEY], b"salt-a")
    assert OPENAI_KEY not in first
    assert key_fingerprint([], b"salt-a") is None


def test_redaction_removes_keys_tokens_and_credential_fields() -> None:
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": f"my key is {OPENAI_KEY}, use it"}],
            "metadata": {"api_key": "plain-secret-value", "note": "Bearer abcdefgh12345678"},
            "other": f"{ANTHROPIC_KEY} and {GOOGLE_KEY} and the-exact-secret-1",
        }
    )
    out = redact_text(body, ["the-exact-secret-1"])
    for secret in (OPENAI_KEY, ANTHROPIC_KEY, GOOGLE_KEY, "plain-secret-value", "abcdefgh12345678"):
        assert secret not in out
    assert "the-exact-secret-1" not in out
    assert json.loads(out)["metadata"]["api_key"] == REDACTED
    assert "my key is" in out and "use it" in out


def test_redaction_leaves_ordinary_text_alone() -> None:
    text = "task-scheduler-for-desk-booking runs on disk-sk-volumes; short sk-12"
    assert redact_text(text, ["short"]) == text


def test_credentials_in_the_upstream_url_reach_neither_the_client_nor_the_log(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: connections are refused
    down = UpstreamConfig(
        name="openai", url=f"http://user:s3cretpw@127.0.0.1:{port}", vendor="openai"
    )
    proxy = start_proxy(upstreams={"openai": down})
    reply = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "gpt-4o"})
    assert reply.status_code == 502
    assert "s3cretpw" not in reply.text and f"http://***@127.0.0.1:{port}" in reply.text
    error = proxy.row()["error"]
    assert "s3cretpw" not in error and f"http://***@127.0.0.1:{port}" in error


def test_credential_query_parameters_are_redacted_in_urls_and_text() -> None:
    line = (
        '127.0.0.1:5000 - "POST /v1beta/models/gemini-2.5-flash:generateContent'
        '?alt=sse&key=plain-query-key-1&X-Amz-Signature=abc123&access_token=tok-456 HTTP/1.1" 200'
    )
    out = redact_url(line)
    for secret in ("plain-query-key-1", "abc123", "tok-456"):
        assert secret not in out
    assert "?alt=sse&key=[REDACTED]&X-Amz-Signature=[REDACTED]&access_token=[REDACTED]" in out
    assert redact_url("http://user:pw@host/x?monkey=1&keys=2&sig=") == (
        "http://***@host/x?monkey=1&keys=2&sig="
    )  # only credential names, only non-empty values
    assert "plain-query-key-1" not in redact_text('"url": "https://x/?key=plain-query-key-1"')
    assert client_secrets([], b"alt=sse&Access_Token=plain-query-key-1") == ["plain-query-key-1"]


def test_the_debug_access_log_never_prints_a_query_key(
    tmp_path: Path, mock_server: ServerThread
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    key = "gemini-query-key-0123456789"
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
            str(tmp_path / "log.db"),
            "--log-level",
            "debug",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url + "/healthz")
        reply = httpx.post(
            f"{url}/v1beta/models/gemini-2.5-flash:generateContent?key={key}",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
        assert reply.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    assert ":generateContent?key=[REDACTED] HTTP/1.1" in output.replace("%3A", ":")  # logged
    assert key not in output


def test_a_query_credential_in_an_upstream_url_is_not_printed() -> None:
    result = CliRunner().invoke(
        cli, ["proxy", "--upstream", "http://127.0.0.1:8000/?key=url-secret-123", "--no-log"]
    )
    assert result.exit_code == 2, result.output
    assert "must not have a query" in result.output
    assert "url-secret-123" not in result.output and "?key=[REDACTED]" in result.output


async def _refuse_and_echo_the_key(scope: Scope, receive: Receive, send: Send) -> None:
    """An upstream that answers 401 quoting the credential it got (header or ``?key=``)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = dict(scope["headers"])
    query = scope["query_string"].decode()
    key = headers.get(b"authorization", b"").decode() or query
    if "plain" in query:
        body, content_type = f"denied for {key}".encode(), b"text/plain"
    else:
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}}).encode()
        content_type = b"application/json"
    await send(
        {"type": "http.response.start", "status": 401, "headers": [(b"content-type", content_type)]}
    )
    await send({"type": "http.response.body", "body": body})


def test_an_upstream_error_quoting_the_key_is_stored_redacted(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    key = "gateway-key-0123456789"  # no vendor shape: only the request's own key finds it
    with ServerThread(_refuse_and_echo_the_key) as upstream:
        echo = {
            name: UpstreamConfig(name=name, url=upstream.url, vendor=name)
            for name in ("openai", "gemini")
        }
        proxy = start_proxy(upstreams=echo)
        chat = {"model": "gpt-4o", "messages": []}
        gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        target = "/v1beta/models/gemini-2.5-flash:generateContent"
        replies = [
            httpx.post(
                proxy.url + "/v1/chat/completions",
                json=chat,
                headers={"authorization": f"Bearer {key}"},
            ),
            httpx.post(f"{proxy.url}{target}?key={key}", json=gemini),
            httpx.post(f"{proxy.url}{target}?plain=1&key={key}", json=gemini),
        ]
        assert [r.status_code for r in replies] == [401, 401, 401]
        assert key in replies[0].text  # the client gets the upstream's answer untouched
        errors = [row["error"] for row in proxy.rows(3)]
    assert all(key not in error for error in errors), errors
    assert errors[0] == "upstream answered 401: Incorrect API key provided: Bearer [REDACTED]"
    assert errors[1] == "upstream answered 401: Incorrect API key provided: key=[REDACTED]"
    assert errors[2] == "upstream answered 401: denied for plain=1&key=[REDACTED]"
