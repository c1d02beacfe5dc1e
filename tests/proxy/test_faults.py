"""Faults and bad input: vendor-shaped errors with the right status, and every one logged."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2  # the official clients' transport: they let its errors through
import openai
import pytest
from proxy_support import RunningProxy, mock_config
from servers import ServerThread, read_body
from upstreams import MockUpstream

from promptcache.proxy.app import build_app
from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.record import RequestRecord
from promptcache.proxy.report import build_report
from promptcache.usage import Usage

ANTHROPIC_KEY = "sk-ant-api03-faults-test-0123456789"
OPENAI_KEY = "sk-proj-faults-test-0123456789abcdef"


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def assert_shape(dialect: str, body: dict[str, Any], status: int) -> str:
    """Check a vendor error body's shape; returns its message."""
    if dialect == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        return str(body["error"]["message"])
    if dialect == "openai":
        assert set(body["error"]) == {"message", "type", "param", "code"}
        return str(body["error"]["message"])
    assert body["error"]["code"] == status and isinstance(body["error"]["status"], str)
    return str(body["error"]["message"])


ROUTES = [
    ("anthropic", "/v1/messages"),
    ("openai", "/v1/chat/completions"),
    ("openai", "/v1/responses"),
    ("gemini", "/v1beta/models/gemini-2.5-flash:generateContent"),
]


@pytest.mark.parametrize(("dialect", "path"), ROUTES)
def test_malformed_json_gets_the_vendors_400_and_is_logged(
    start_proxy: Callable[..., RunningProxy], dialect: str, path: str
) -> None:
    proxy = start_proxy()
    reply = httpx.post(proxy.url + path, content=b'{"model": "x", "messages": [')
    assert reply.status_code == 400
    assert "not valid JSON" in assert_shape(dialect, reply.json(), 400)
    not_object = httpx.post(proxy.url + path, content=b'["a list"]')
    assert not_object.status_code == 400
    message = assert_shape(dialect, not_object.json(), 400)
    assert "must be a JSON object, got a JSON array" in message
    rows = proxy.rows(2)
    assert [r["status"] for r in rows] == [400, 400]
    assert "not valid JSON" in rows[0]["error"]
    assert rows[0]["route"] == path


def test_a_malformed_gemini_body_is_logged_under_the_model_its_path_names(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # Gemini names the model in the path, not the body: a request the proxy refuses for its
    # body still belongs to that model in the log, the report and /metrics.
    proxy = start_proxy()
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    reply = httpx.post(proxy.url + path, content=b'{"contents": [')
    assert reply.status_code == 400
    assert [(r["model"], r["status"]) for r in proxy.rows(1)] == [("gemini-2.5-flash", 400)]
    scraped = httpx.get(proxy.url + "/metrics").text
    assert 'model="gemini-2.5-flash",status="400"' in scraped


@pytest.mark.parametrize(("dialect", "path"), ROUTES)
def test_an_integer_longer_than_python_converts_gets_a_400_saying_so(
    start_proxy: Callable[..., RunningProxy],
    mock_upstream: MockUpstream,
    dialect: str,
    path: str,
) -> None:
    # 5000 digits is valid JSON, but past Python's int-conversion limit (4300 digits)
    proxy = start_proxy()
    body = b'{"model": "m", "max_tokens": ' + b"9" * 5000 + b', "messages": []}'
    reply = httpx.post(proxy.url + path, content=body, timeout=30)
    assert reply.status_code == 400, reply.text
    message = assert_shape(dialect, reply.json(), 400)
    assert "integer of more than 4300 digits" in message and "send shorter numbers" in message
    assert "not valid JSON" not in message and "sys." not in message
    assert mock_upstream.requests == []
    row = proxy.row()
    assert row["status"] == 400 and "4300 digits" in row["error"]


def test_a_request_sqlite_cannot_store_as_sent_is_logged_and_logging_goes_on(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # Valid JSON with a lone surrogate in the model name: forwarded as sent, logged escaped.
    proxy = start_proxy()
    odd = httpx.post(
        proxy.url + "/v1/chat/completions",
        content=b'{"model": "gpt-4o\\ud800", "messages": [{"role": "user", "content": "x"}]}',
    )
    assert odd.status_code == 200
    normal = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}'
    assert httpx.post(proxy.url + "/v1/chat/completions", content=normal).status_code == 200
    rows = proxy.rows(2)
    assert [r["model"] for r in rows] == ["gpt-4o\\ud800", "gpt-4o"]
    assert all(r["cache_read_tokens"] == 1920 for r in rows)


def test_anthropic_shape_is_what_the_official_client_expects(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy(max_body_bytes=2000)
    with (
        anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0) as client,
        pytest.raises(anthropic.APIStatusError) as info,
    ):
        client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=8,
            messages=[{"role": "user", "content": "x" * 5000}],
        )
    assert info.value.status_code == 413
    assert info.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    assert proxy.row()["status"] == 413


@pytest.mark.parametrize("chunked", [False, True])
def test_bodies_over_the_limit_get_413(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream, chunked: bool
) -> None:
    proxy = start_proxy(max_body_bytes=1000)
    body = b'{"model": "gpt-4o", "messages": [], "pad": "' + b"x" * 2000 + b'"}'

    def pieces() -> Iterator[bytes]:
        yield from (body[i : i + 100] for i in range(0, len(body), 100))

    reply = httpx.post(
        proxy.url + "/v1/chat/completions", content=pieces() if chunked else body, timeout=10
    )
    assert reply.status_code == 413
    assert "--max-body-bytes" in assert_shape("openai", reply.json(), 413)
    assert mock_upstream.requests == []
    row = proxy.row()
    assert row["status"] == 413 and "limit of 1000 bytes" in row["error"]


def test_unknown_routes_get_404_naming_the_supported_ones(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    reply = httpx.post(proxy.url + "/v2/chat", json={})
    assert reply.status_code == 404
    message = assert_shape("openai", reply.json(), 404)
    assert "POST /v1/messages" in message and "POST /v1/chat/completions" in message
    # docs/proxy.md's routes table lists the proxy's own routes too, and so does the 404: a
    # mistyped /metric finds /metrics there
    typo = httpx.get(proxy.url + "/metric")
    assert typo.status_code == 404
    assert assert_shape("openai", typo.json(), 404).endswith(
        "and answers itself GET /metrics, GET /healthz, GET /report, GET /report.json"
    )
    gemini = httpx.post(proxy.url + "/v1beta/models/gemini-2.5-flash:explode", json={})
    assert gemini.status_code == 404
    assert "generateContent" in assert_shape("gemini", gemini.json(), 404)
    wrong_method = httpx.post(proxy.url + "/v1/models", json={})
    assert wrong_method.status_code == 405
    assert "GET" in assert_shape("openai", wrong_method.json(), 405)
    # a vendor route with a trailing slash is not that route: a 404 listing the routes, not a
    # redirect (307) to the Host header's host
    for path, dialect in (("/v1/chat/completions/", "openai"), ("/v1/messages/", "anthropic")):
        slash = httpx.post(proxy.url + path, json={"model": "m", "messages": []})
        assert slash.status_code == 404 and "location" not in slash.headers, path
        assert "POST /v1/chat/completions" in assert_shape(dialect, slash.json(), 404)
    # as docs/proxy.md says: a request id only where there is a row (the bad Gemini method)
    assert "x-promptcache-request-id" not in reply.headers
    assert "x-promptcache-request-id" not in wrong_method.headers
    row = proxy.row()
    assert gemini.headers["x-promptcache-request-id"] == row["id"] and row["status"] == 404


@pytest.mark.parametrize(
    ("path", "status", "dialect"),
    [
        ("/v1/messages", 529, "anthropic"),
        ("/v1/chat/completions", 503, "openai"),
        ("/v1beta/models/gemini-2.5-pro:generateContent", 500, "gemini"),
    ],
)
def test_upstream_5xx_passes_through_and_is_logged(
    start_proxy: Callable[..., RunningProxy], path: str, status: int, dialect: str
) -> None:
    proxy = start_proxy()
    reply = httpx.post(
        proxy.url + path,
        json={"model": "m", "messages": [], "contents": []},
        headers={"x-mock-fault": f"status-{status}"},
    )
    assert reply.status_code == status
    message = assert_shape(dialect, reply.json(), status)
    assert reply.headers["x-upstream"] == "mock"  # the upstream's own answer, untouched
    row = proxy.row()
    assert row["status"] == status
    assert row["error"] == f"upstream answered {status}: {message}"


def test_refused_connection_gives_502_in_each_vendor_shape(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    down = closed_port_url()
    proxy = start_proxy(
        upstreams={
            name: UpstreamConfig(name=name, url=down, vendor=name)
            for name in ("anthropic", "openai", "gemini")
        }
    )
    with (
        anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0) as client,
        pytest.raises(anthropic.APIStatusError) as a_info,
    ):
        client.messages.create(
            model="claude-haiku-4-5", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )
    assert a_info.value.status_code == 502
    with (
        openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0) as client,
        pytest.raises(openai.APIStatusError) as o_info,
    ):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert o_info.value.status_code == 502
    gemini = httpx.post(proxy.url + ROUTES[3][1], json={"contents": []})
    assert gemini.status_code == 502
    assert "refused" in assert_shape("gemini", gemini.json(), 502)
    rows = proxy.rows(3)
    assert [r["status"] for r in rows] == [502, 502, 502]
    assert all(down in r["error"] for r in rows)


def test_upstream_timeout_gives_504(
    start_proxy: Callable[..., RunningProxy], mock_server: Any
) -> None:
    slow = UpstreamConfig(
        name="anthropic", url=mock_server.url, vendor="anthropic", read_timeout_s=0.3
    )
    proxy = start_proxy(upstreams={"anthropic": slow})
    reply = httpx.post(
        proxy.url + "/v1/messages",
        json={"model": "claude-haiku-4-5", "messages": []},
        headers={"x-mock-fault": "slow"},
        timeout=10,
    )
    assert reply.status_code == 504
    assert assert_shape("anthropic", reply.json(), 504).startswith("upstream anthropic")
    assert reply.json()["error"]["type"] == "timeout_error"
    row = proxy.row()
    assert row["status"] == 504 and "did not answer in time" in row["error"]
    # which limit ran out, and where to raise it
    assert "(read_timeout_s = 0.3 s, set per upstream in --config)" in row["error"]
    assert "read_timeout_s = 0.3 s" in reply.json()["error"]["message"]


def test_client_disconnect_closes_the_upstream_and_keeps_partial_usage(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy()
    with anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0) as client:
        stream = client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=8,
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            extra_headers={"x-mock-fault": "hang"},
        )
        first = next(iter(stream))
        assert first.type == "message_start"
        stream.close()  # the client goes away mid-stream
    assert mock_upstream.disconnected.wait(10), "the proxy kept the upstream request open"
    row = proxy.row()
    assert row["error"] == "client disconnected before the response was complete"
    assert row["status"] == 200 and row["stream"] == 1
    # message_start's counts were recorded: input and cache fields, output so far
    assert (row["uncached_input_tokens"], row["cache_read_tokens"]) == (1532, 10240)
    assert row["cache_write_5m_tokens"] == 2048
    assert row["output_tokens"] == 3  # message_start's count; the final 220 never came


@pytest.mark.parametrize("chunk", ["", "7"])
def test_upstream_dropping_mid_stream_is_logged_and_not_hidden(
    start_proxy: Callable[..., RunningProxy], chunk: str
) -> None:
    proxy = start_proxy()
    headers = {"x-mock-fault": "cut", "x-mock-chunk": chunk} if chunk else {"x-mock-fault": "cut"}
    with (
        anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0) as client,
        pytest.raises((anthropic.APIError, httpx2.HTTPError)) as info,
        client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=8,
            messages=[{"role": "user", "content": "x"}],
            extra_headers=headers,
        ) as stream,
    ):
        for _ in stream:
            pass
    if not chunk:
        # cut at an event boundary: the proxy ends the stream with Anthropic's error event
        assert isinstance(info.value, anthropic.APIError)
        assert "mid-response" in str(info.value)
    row = proxy.row()
    assert "broke the HTTP protocol" in row["error"] or "dropped" in row["error"]
    assert row["cache_read_tokens"] == 10240  # message_start arrived before the cut


def test_auth_token_is_required_when_set(start_proxy: Callable[..., RunningProxy]) -> None:
    proxy = start_proxy(auth_token="s3cret-token")
    missing = httpx.post(proxy.url + "/v1/messages", json={"model": "m", "messages": []})
    assert missing.status_code == 401
    assert "missing" in assert_shape("anthropic", missing.json(), 401)
    wrong = httpx.post(
        proxy.url + "/v1/chat/completions",
        json={"model": "m", "messages": []},
        headers={"x-promptcache-auth": "guess"},
    )
    assert wrong.status_code == 401
    assert "wrong" in assert_shape("openai", wrong.json(), 401)
    ok = httpx.post(
        proxy.url + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": []},
        headers={"x-promptcache-auth": "s3cret-token"},
    )
    assert ok.status_code == 200
    assert len(proxy.rows(1)) == 1  # refused requests are not recorded


def test_hooks_see_parsed_objects_and_a_failing_hook_breaks_nothing(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    seen: list[RequestRecord] = []

    def broken(record: RequestRecord) -> None:
        raise RuntimeError("hook bug")

    proxy.app.state.record_hooks[:0] = [broken, seen.append]
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0) as client:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    row = proxy.row()
    assert len(seen) == 1 and seen[0].id == row["id"]
    assert isinstance(seen[0].usage, Usage) and seen[0].usage.cache_read_tokens == 1920
    assert seen[0].fingerprint is not None and seen[0].fingerprint.prefix_hash == row["prefix_hash"]
    assert seen[0].request_json == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "x"}],
    }


@pytest.mark.parametrize(
    ("dialect", "path", "depth"),
    [
        *[(dialect, path, 1_000) for dialect, path in ROUTES],
        ("openai", "/v1/chat/completions", 513),
        ("openai", "/v1/chat/completions", 900),
        ("openai", "/v1/chat/completions", 5_000),
        ("openai", "/v1/chat/completions", 100_000),
    ],
)
def test_json_nested_too_deeply_gets_the_vendors_400_and_a_row_saying_so(
    start_proxy: Callable[..., RunningProxy],
    mock_upstream: MockUpstream,
    dialect: str,
    path: str,
    depth: int,
) -> None:
    # Python's json parser raises RecursionError (not ValueError) somewhere around 1,000 levels,
    # depending on how deep the stack already is: every depth past the limit gets one answer.
    proxy = start_proxy()
    body = b'{"model": "m", "messages": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
    reply = httpx.post(proxy.url + path, content=body, timeout=30)
    assert reply.status_code == 400, reply.text
    assert "nested too deeply" in assert_shape(dialect, reply.json(), 400)
    assert "512 levels" in assert_shape(dialect, reply.json(), 400)
    assert mock_upstream.requests == []
    row = proxy.row()
    assert row["status"] == 400 and "nested too deeply" in row["error"]


def test_json_at_the_depth_limit_is_forwarded(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy()
    deep = "[" * 511 + "]" * 511  # 512 levels, the body itself included
    body = f'{{"model": "gpt-4o", "messages": [{{"role": "user", "content": "x"}}], "x": {deep}}}'
    reply = httpx.post(proxy.url + "/v1/chat/completions", content=body.encode(), timeout=30)
    assert reply.status_code == 200, reply.text
    assert len(mock_upstream.requests) == 1
    assert proxy.row()["error"] is None


@pytest.mark.parametrize(
    ("path", "body", "message", "cache_read"),
    [
        ("/v1/messages", {"model": "claude-haiku-4-5"}, "overloaded_error: Overloaded", 10240),
        (
            "/v1/chat/completions",
            {"model": "gpt-4o"},
            "server_error: The server had an error",
            None,
        ),
        ("/v1/responses", {"model": "gpt-4.1"}, "server_error: The model had an error", None),
        (
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            {},
            "UNAVAILABLE: The model is overloaded.",
            11264,
        ),
    ],
)
def test_an_upstream_error_mid_stream_is_logged_as_an_error_with_the_usage_before_it(
    start_proxy: Callable[..., RunningProxy],
    path: str,
    body: dict[str, Any],
    message: str,
    cache_read: int | None,
) -> None:
    proxy = start_proxy()
    request = {**body, "stream": True, "messages": [], "input": "x", "contents": []}
    with httpx.stream(
        "POST", proxy.url + path, json=request, headers={"x-mock-fault": "error"}
    ) as reply:
        relayed = reply.read()
    assert reply.status_code == 200
    assert b'"error"' in relayed  # the client got the vendor's error event as sent
    row = proxy.row()
    assert row["status"] == 200 and row["stream"] == 1
    assert row["error"] == f"upstream sent an error mid-stream: {message}"
    assert row["cache_read_tokens"] == cache_read  # the usage reported before the error
    now = time.time()
    report = build_report(proxy.db_path, since=now - 3600, until=now + 60)
    assert report.total.requests == 1 and report.total.errors == 1


@pytest.mark.parametrize(
    ("path", "body", "terminal"),
    [
        ("/v1/messages", {"model": "claude-haiku-4-5"}, b"message_stop"),
        ("/v1/chat/completions", {"model": "gpt-4o"}, b"[DONE]"),
        ("/v1/responses", {"model": "gpt-4.1"}, b"response.completed"),
        (
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            {},
            b'"finishReason"',
        ),
    ],
)
def test_a_client_closing_right_after_the_terminal_event_is_not_an_error(
    start_proxy: Callable[..., RunningProxy],
    mock_upstream: MockUpstream,
    path: str,
    body: dict[str, Any],
    terminal: bytes,
) -> None:
    # The upstream keeps its response open after the last event, so the proxy is still waiting
    # for the end of the body when the client (which has every event) closes: the race of a
    # fast client against the upstream's close, made deterministic.
    proxy = start_proxy()
    request = {**body, "stream": True, "messages": [], "input": "x", "contents": []}
    received = b""
    with httpx.stream(
        "POST", proxy.url + path, json=request, headers={"x-mock-fault": "linger"}, timeout=10
    ) as reply:
        for chunk in reply.iter_raw():
            received += chunk
            if terminal in received and received.endswith((b"\n\n", b"\r\n\r\n")):
                break  # leaving the block closes the connection
    assert terminal in received
    assert mock_upstream.disconnected.wait(10)
    row = proxy.row()
    assert row["status"] == 200 and row["error"] is None
    assert row["output_tokens"] is not None and row["cost_usd"] is not None


def test_a_pooled_connection_the_upstream_closes_as_a_request_goes_out_is_retried(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # uvicorn closes an idle keep-alive connection after timeout_keep_alive; requests timed
    # around that moment meet a connection the upstream is closing. The proxy must send them
    # again on a fresh connection instead of answering 502.
    keep_alive_s = 0.1
    with ServerThread(MockUpstream(), timeout_keep_alive=keep_alive_s) as upstream:
        target = UpstreamConfig(name="openai", url=upstream.url, vendor="openai")
        proxy = start_proxy(upstreams={"openai": target}, db_path=None)
        failures: list[str] = []
        sent: list[int] = []

        def sweep(offset_ms: float) -> None:
            with httpx.Client(base_url=proxy.url, timeout=30) as client:
                for step in range(SWEEP_STEPS):
                    # idle times from 4 ms under the keep-alive to 4 ms over it
                    time.sleep(keep_alive_s + (offset_ms + step * 0.4 - 4) / 1000)
                    reply = client.post(
                        "/v1/chat/completions",
                        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
                    )
                    sent.append(reply.status_code)
                    if reply.status_code != 200:
                        failures.append(reply.text)

        threads = [threading.Thread(target=sweep, args=(i * 0.05,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert len(sent) == 8 * SWEEP_STEPS
        assert failures == []


SWEEP_STEPS = 20


def read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_client_limits_on_either_http_parser(parser: str) -> None:
    # promptcache.client_limits on uvicorn's two HTTP/1.1 protocols (httptools is the one the
    # proxy extra installs; h11 runs without it), in a real server on 127.0.0.1
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from promptcache.client_limits import ClientLimits, protocol_class

    base = H11Protocol if parser == "h11" else HttpToolsProtocol
    limits = ClientLimits(head_timeout_s=0.5, body_timeout_s=0.5, max_head_bytes=8192)
    with ServerThread(MockUpstream(), http=protocol_class(limits, 3, base)) as server:
        address = ("127.0.0.1", server.port)
        with socket.create_connection(address, timeout=20) as slow:
            slow.sendall(b"GET /v1/models HTTP/1.1\r\nHost: a\r\nX-Slow: aaa")
            assert read_until_closed(slow).startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        with socket.create_connection(address, timeout=20) as short:
            short.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\n{}"
            )
            assert read_until_closed(short).startswith(b"HTTP/1.1 408 ")
        with socket.create_connection(address, timeout=20) as big:
            big.sendall(b"GET /v1/models HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 20_000)
            assert read_until_closed(big)[:12] in (b"HTTP/1.1 431", b"HTTP/1.1 400")

        # at the limit of 3, a new connection replaces the one that waited longest for a head
        idle = [socket.create_connection(address, timeout=20) for _ in range(3)]
        time.sleep(0.1)  # accepted, in order
        reply = httpx.post(server.url + "/v1/chat/completions", json={"model": "m"}, timeout=20)
        assert reply.status_code == 200
        assert read_until_closed(idle[0]) == b""  # closed for the new one, without an answer
        for sock in idle:
            sock.close()

        # when every connection is busy with a request, a new one gets 503
        def hang() -> None:
            url = server.url + "/v1/chat/completions"
            fault = {"x-mock-fault": "hang"}
            with (
                contextlib.suppress(httpx.HTTPError),
                httpx.stream("POST", url, json={"stream": True}, headers=fault, timeout=20) as s,
            ):
                for _ in s.iter_bytes():
                    if done.is_set():
                        return

        upstream = server.app
        assert isinstance(upstream, MockUpstream)
        upstream.reset()
        done = threading.Event()
        hanging = [threading.Thread(target=hang) for _ in range(3)]
        for thread in hanging:
            thread.start()
        deadline = time.monotonic() + 20
        while len(upstream.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        with socket.create_connection(address, timeout=20) as extra:
            assert read_until_closed(extra).startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        done.set()
        for thread in hanging:
            thread.join(20)


async def _unreadable_usage_upstream(scope: Any, receive: Any, send: Any) -> None:
    """An invented upstream answering 200 with what the model name asks for: a page that is
    not JSON, a usage whose count is a string, or (``fine``) a usage that is readable."""
    if scope["type"] != "http":
        return
    request = json.loads(await read_body(receive))
    model, path = request["model"], scope["path"]
    anthropic_route = path.startswith("/v1/messages")
    if model == "html":
        body, kind = b"<html><body>maintenance</body></html>", b"text/html"
    else:
        count: Any = "ten" if model == "string-count" else 10
        if anthropic_route:
            reply: dict[str, Any] = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": "hi"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": count, "output_tokens": 2},
            }
        else:
            reply = {
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "hi"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": count, "completion_tokens": 2, "total_tokens": 12},
            }
            if model == "no-count":  # a usage object without its required count
                del reply["usage"]["prompt_tokens"]
        body, kind = json.dumps(reply).encode(), b"application/json"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def _unreadable_usage_proxy(tmp_path: Path) -> Iterator[tuple[RunningProxy, openai.OpenAI]]:
    """A proxy logging to ``tmp_path/log.db`` in front of ``_unreadable_usage_upstream``, and
    the official OpenAI client through it; both servers stop when the block ends."""
    with ServerThread(_unreadable_usage_upstream) as upstream:
        app = build_app(mock_config(upstream.url, tmp_path / "log.db"))
        with ServerThread(app) as server:
            proxy = RunningProxy(server.url, tmp_path / "log.db", app, server)
            yield (
                proxy,
                openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0),
            )


def test_a_response_whose_usage_cannot_be_read_keeps_the_requests_prefix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The prefix columns come from the request: an upstream page that is not JSON, or a usage
    # count that is a string, leaves the usage NULL but not the prefix hash the break explainer
    # needs, and the log says so in one line, not with a traceback.
    with _unreadable_usage_proxy(tmp_path) as (proxy, chat), caplog.at_level("WARNING"):
        messages: Any = [
            {"role": "system", "content": "You answer questions about invented anvils."},
            {"role": "user", "content": "hi"},
        ]
        for model in ("fine", "string-count"):
            reply = chat.chat.completions.create(model=model, messages=messages)
            assert reply.choices[0].message.content == "hi"
        page = httpx.post(
            proxy.url + "/v1/chat/completions", json={"model": "html", "messages": messages}
        )
        assert page.status_code == 200 and "maintenance" in page.text
        claude = anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0)
        claude.messages.create(
            model="string-count",
            max_tokens=8,
            system="You sell invented anvils.",
            messages=[{"role": "user", "content": "hi"}],
        )
        rows = proxy.rows(4)
    by_model = {row["model"]: row for row in rows}
    assert by_model["fine"]["total_input_tokens"] == 10 and by_model["fine"]["prefix_hash"]
    for model in ("string-count", "html"):
        row = by_model[model]
        assert row["status"] == 200 and row["total_input_tokens"] is None
        # as for the look-alike "fine": the request's prefix is recorded (the hash covers the
        # model too, so each model has its own)
        assert len(row["prefix_hash"] or "") == 64 and row["segment_hashes"], model
    assert rows[-1]["api"] == "anthropic" and rows[-1]["prefix_hash"]
    assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)
    warnings = [m for m in caplog.messages if "recorded without usage" in m]
    assert len(warnings) == 3, caplog.text
    assert "'prompt_tokens' must be an integer token count, got 'ten'" in warnings[0]


def test_usage_missing_its_count_is_logged_without_a_hint_at_an_option_the_proxy_lacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The proxy takes the API from the route, not from an --api option or api argument: the
    # warning names what is missing and leaves out the SDK's and `promptcache cost`'s hint.
    with _unreadable_usage_proxy(tmp_path) as (proxy, chat), caplog.at_level("WARNING"):
        chat.chat.completions.create(model="no-count", messages=[{"role": "user", "content": "hi"}])
        row = proxy.row()
    assert row["status"] == 200 and row["total_input_tokens"] is None
    warnings = [m for m in caplog.messages if "recorded without usage" in m]
    assert len(warnings) == 1, caplog.text
    assert warnings[0].endswith(
        "recorded without usage: the upstream's response has none the proxy can read "
        "(openai_chat usage has no 'prompt_tokens': this does not look like openai_chat's "
        "usage object)"
    ), warnings[0]


@pytest.mark.parametrize(("dialect", "path"), ROUTES)
def test_a_compressed_request_body_gets_415_naming_the_encoding(
    start_proxy: Callable[..., RunningProxy], dialect: str, path: str
) -> None:
    # The body is valid JSON, gzip-compressed: the answer says so instead of calling it invalid
    # JSON with a UTF-8 decoding error.
    proxy = start_proxy()
    body = json.dumps({"model": "m", "messages": [], "contents": []}).encode()
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    reply = httpx.post(proxy.url + path, content=gzip.compress(body), headers=headers)
    assert reply.status_code == 415
    message = assert_shape(dialect, reply.json(), 415)
    assert "content-encoding: gzip" in message and "uncompressed" in message
    # the look-alikes: the same JSON uncompressed (content-encoding: identity) is forwarded, and
    # an uncompressed body that is not JSON stays a 400
    headers["content-encoding"] = "identity"
    assert httpx.post(proxy.url + path, content=body, headers=headers).status_code == 200
    broken = httpx.post(proxy.url + path, content=body[:-1], headers=headers)
    assert broken.status_code == 400 and "not valid JSON" in assert_shape(
        dialect, broken.json(), 400
    )
    rows = proxy.rows(3)
    assert [r["status"] for r in rows] == [415, 200, 400]
    assert "content-encoding: gzip" in rows[0]["error"]


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_a_413_answered_before_the_body_ends_keeps_the_connection_for_the_next_request(
    tmp_path: Path, mock_server: ServerThread, parser: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The proxy answers 413 as soon as a body passes --max-body-bytes; the rest of that body
    # (here 300 KB) is still that request's, not a request head over the 64 KiB head limit:
    # the same connection then serves the next request, and no head-size warning is logged.
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from promptcache.client_limits import ClientLimits, protocol_class

    base = H11Protocol if parser == "h11" else HttpToolsProtocol
    app = build_app(mock_config(mock_server.url, tmp_path / "log.db", max_body_bytes=1000))
    server = ServerThread(app, http=protocol_class(ClientLimits(), 8, base))
    with server, socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        files = sock.makefile("rb")

        def answer() -> tuple[bytes, bytes]:
            status = files.readline()
            length = 0
            while (line := files.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            return status, files.read(length)

        big = b'{"model": "m", "messages": [], "x": "' + b"a" * 300_000 + b'"}'
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n"
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(big) + big)
        status, body = answer()
        assert status.startswith(b"HTTP/1.1 413 "), status + body
        small = b'{"model": "m", "messages": []}'
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(small) + small)
        status, body = answer()
        assert status.startswith(b"HTTP/1.1 200 "), status + body
    assert "request head passed" not in caplog.text
