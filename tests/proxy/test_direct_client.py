"""The proxy's HTTP/1.1 client for plain-http upstreams (proxy/http1.py), against a raw TCP
upstream on 127.0.0.1 that answers with exactly the bytes each test scripts: keep-alive reuse,
a body delimited by the connection's end, interim 1xx responses, a malformed response."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from proxy_support import mock_config
from servers import ServerThread

from promptcache.proxy.app import build_app
from promptcache.proxy.config import UpstreamConfig

BODY = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
COMPLETION = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }
).encode()


class RawUpstream:
    """A TCP server answering each request with ``answer(n)`` (n: requests so far, from 0),
    closing the connection after it when ``close_after`` is true; counts connections and keeps
    every request's bytes."""

    def __init__(self, answer: Callable[[int], bytes], close_after: bool = False) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buffer = rest[length:]
                conn.sendall(self.answer(len(self.requests) - 1))
                if self.close_after:
                    return

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def proxy_to(tmp_path: Path) -> Iterator[Callable[[RawUpstream], str]]:
    servers: list[ServerThread] = []

    def start(upstream: RawUpstream) -> str:
        upstreams = {"openai": UpstreamConfig(name="openai", url=upstream.url, vendor="openai")}
        app = build_app(mock_config(upstream.url, tmp_path / "log.db", upstreams=upstreams))
        servers.append(ServerThread(app).__enter__())
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


def response(body: bytes, *head: bytes) -> bytes:
    lines = [b"HTTP/1.1 200 OK", b"content-type: application/json", *head]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def test_a_kept_alive_connection_carries_the_next_requests(
    proxy_to: Callable[[RawUpstream], str],
) -> None:
    upstream = RawUpstream(lambda n: response(COMPLETION, b"content-length: %d" % len(COMPLETION)))
    url = proxy_to(upstream)
    with httpx.Client() as client:
        answers = [client.post(url + "/v1/chat/completions", content=BODY) for _ in range(3)]
    upstream.close()
    assert [a.content for a in answers] == [COMPLETION] * 3
    assert upstream.connections == 1
    assert len(upstream.requests) == 3
    head, _, body = upstream.requests[0].partition(b"\r\n\r\n")
    assert body == BODY
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    assert lines[1] == b"Host: " + upstream.url.removeprefix("http://").encode()
    assert b"Content-Length: %d" % len(BODY) in lines


def test_a_body_ended_by_the_connection_closing_is_relayed_whole(
    proxy_to: Callable[[RawUpstream], str],
) -> None:
    # No content-length, not chunked: the body runs to the connection's end (RFC 9112 6.3).
    upstream = RawUpstream(lambda n: response(COMPLETION), close_after=True)
    url = proxy_to(upstream)
    with httpx.Client() as client:
        first = client.post(url + "/v1/chat/completions", content=BODY)
        second = client.post(url + "/v1/chat/completions", content=BODY)
    upstream.close()
    assert first.status_code == second.status_code == 200
    assert first.content == second.content == COMPLETION
    assert upstream.connections == 2  # a connection that ended its body is never reused


def test_an_interim_response_is_skipped(proxy_to: Callable[[RawUpstream], str]) -> None:
    interim = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(COMPLETION), COMPLETION)
    upstream = RawUpstream(lambda n: interim + response(chunked, b"transfer-encoding: chunked"))
    url = proxy_to(upstream)
    answer = httpx.post(url + "/v1/chat/completions", content=BODY)
    upstream.close()
    assert answer.status_code == 200
    assert answer.content == COMPLETION
    assert "link" not in answer.headers


def test_a_malformed_response_gets_502(proxy_to: Callable[[RawUpstream], str]) -> None:
    upstream = RawUpstream(lambda n: b"NOT HTTP AT ALL\r\n\r\n", close_after=True)
    url = proxy_to(upstream)
    answer = httpx.post(url + "/v1/chat/completions", content=BODY)
    upstream.close()
    assert answer.status_code == 502
    assert "broke the HTTP protocol" in answer.json()["error"]["message"]
