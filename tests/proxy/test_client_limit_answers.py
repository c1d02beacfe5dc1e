"""What a client is told when ``promptcache.client_limits`` turns it away, through a live
proxy (``build_app`` under the limited uvicorn protocol, as ``promptcache proxy`` runs it) in
front of the mock upstream: the official OpenAI and Anthropic clients read a message that names
the limit and what to do, not an empty 503; a raw client too slow with its head gets a 408 that
names --header-timeout."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anthropic
import openai
import pytest
from proxy_support import mock_config
from servers import ServerThread
from upstreams import MockUpstream

from promptcache.client_limits import ClientLimits, protocol_class
from promptcache.proxy.app import build_app


def _read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@contextmanager
def _requests_held(port: int, mock: MockUpstream, count: int) -> Iterator[None]:
    """``count`` connections to the proxy on ``port``, each with a streamed chat request that
    the mock upstream holds open (``x-mock-fault: hang``): inside, once the upstream has them
    all, they hold ``count`` of the proxy's client connections; closed on leaving."""
    body = json.dumps({"model": "gpt-4o", "stream": True, "messages": []}).encode()
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nx-mock-fault: hang\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
    )
    with ExitStack() as held:
        for _ in range(count):
            sock = held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=20))
            sock.sendall(head + body)
        deadline = time.monotonic() + 20
        while len(mock.requests) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        yield


def test_a_client_turned_away_is_told_which_limit_and_what_to_do(tmp_path: Path) -> None:
    limits = ClientLimits(head_timeout_s=0.5)
    with (
        ServerThread(MockUpstream()) as upstream,
        ServerThread(
            build_app(mock_config(upstream.url, tmp_path / "log.db")),
            http=protocol_class(limits, 2),
        ) as proxy,
    ):
        mock = upstream.app
        assert isinstance(mock, MockUpstream)
        # two requests in flight hold both connections the limit allows
        with _requests_held(proxy.port, mock, 2):
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-x", max_retries=0)
            with pytest.raises(openai.InternalServerError) as info:
                client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
                )
            assert info.value.status_code == 503
            assert "all 2 client connections" in info.value.message
            assert "--max-client-connections" in info.value.message
            claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-x", max_retries=0)
            with pytest.raises(anthropic.InternalServerError) as refused:
                claude.messages.create(
                    model="claude-haiku-4-5",
                    max_tokens=8,
                    messages=[{"role": "user", "content": "hi"}],
                )
            assert "--max-client-connections" in refused.value.message
        mock.disconnected.wait(10)  # both requests ended: their connections are free again

        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as slow:
            slow.sendall(b"GET /v1/models HTTP/1.1\r\nHost: a\r\nX-Slow: aaa")
            head, _, body = _read_until_closed(slow).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    message = json.loads(body)["error"]["message"]
    assert "within 0.5 s" in message and "--header-timeout" in message


def test_a_limit_of_one_connection_is_told_in_the_singular(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With --max-client-connections 1 the answer and the log speak of the one connection in the
    singular, not "all 1 client connections ... are busy" or "1 connections open"."""
    with (
        ServerThread(MockUpstream()) as upstream,
        ServerThread(
            build_app(mock_config(upstream.url, tmp_path / "log.db")),
            http=protocol_class(ClientLimits(), 1),
        ) as proxy,
    ):
        mock = upstream.app
        assert isinstance(mock, MockUpstream)
        with caplog.at_level("WARNING", logger="promptcache.server"):
            with (
                _requests_held(proxy.port, mock, 1),
                openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-x", max_retries=0) as c,
                pytest.raises(openai.InternalServerError) as info,
            ):
                c.models.list()
            assert info.value.status_code == 503
            assert info.value.message.endswith(
                "the 1 client connection this server allows is busy with a request (its "
                "--max-client-connections); retry shortly, or raise --max-client-connections"
            ), info.value.message
            mock.disconnected.wait(10)
            # an idle connection holds the one place; a new one replaces it
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as idle:
                idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
                assert idle.recv(65536).startswith(b"HTTP/1.1 200")
                with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as new:
                    new.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                    assert _read_until_closed(new).startswith(b"HTTP/1.1 200")
        logged = [r.getMessage() for r in caplog.records if r.name == "promptcache.server"]
        assert any(
            m.startswith("refused a connection: the 1 connection is busy with a request (")
            for m in logged
        ), logged
        assert any(
            m.startswith("1 connection open (--max-client-connections): closed the one")
            for m in logged
        ), logged
