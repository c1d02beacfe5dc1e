"""The proxy's client for plain-http upstreams (aiohttp, proxy/direct_client.py), through the
proxy, against a raw TCP upstream on 127.0.0.1 that answers with exactly the bytes each test
scripts: keep-alive reuse, the exact request head, a body delimited by the connection's end,
interim 1xx responses, a malformed response, a pooled connection closed under a request."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_support import mock_config, read_rows
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
    """A TCP server answering each request with ``answer(n)`` (n: requests so far, from 0;
    a list: its pieces written ``gap_s`` seconds apart), closing the connection after it when
    ``close_after`` is true, and closing it instead of answering when ``n`` is in ``drop``;
    counts connections and keeps every request's bytes."""

    def __init__(
        self,
        answer: Callable[[int], bytes | list[bytes]],
        close_after: bool = False,
        drop: frozenset[int] = frozenset(),
        gap_s: float = 0.0,
    ) -> None:
        self.answer = answer
        self.gap_s = gap_s
        self.close_after = close_after
        self.drop = drop
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
                if len(self.requests) - 1 in self.drop:
                    return
                answer = self.answer(len(self.requests) - 1)
                for i, piece in enumerate([answer] if isinstance(answer, bytes) else answer):
                    if i:
                        time.sleep(self.gap_s)
                    conn.sendall(piece)
                if self.close_after:
                    return

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def proxy_to(tmp_path: Path) -> Iterator[Callable[[RawUpstream], str]]:
    servers: list[ServerThread] = []

    def start(upstream: RawUpstream, **settings: Any) -> str:
        config = UpstreamConfig(name="openai", url=upstream.url, vendor="openai", **settings)
        upstreams = {"openai": config}
        app = build_app(mock_config(upstream.url, tmp_path / "log.db", upstreams=upstreams))
        servers.append(ServerThread(app).__enter__())
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


def response(body: bytes, *head: bytes) -> bytes:
    lines = [b"HTTP/1.1 200 OK", b"content-type: application/json", *head]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def streamed_chat(url: str) -> bytes:
    """The raw bytes a streaming chat completion through the proxy at ``url`` relays."""
    sent = b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", url + "/v1/chat/completions", content=sent) as reply,
    ):
        return b"".join(reply.iter_raw())


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


def test_a_stream_whose_end_arrives_with_its_last_event_is_relayed_whole(
    proxy_to: Callable[[RawUpstream], str], tmp_path: Path
) -> None:
    # The whole chunked stream and its terminating chunk in one write: the proxy reads the end
    # with the last event and sends that event with the end of its response. The client gets
    # every byte, the log the usage, and the connection carries the next request.
    events = [
        b'data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
        b'data: {"id":"c1","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":7,'
        b'"completion_tokens":1,"total_tokens":8}}\n\n',
        b"data: [DONE]\n\n",
    ]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
    upstream = RawUpstream(lambda n: head + b"\r\n\r\n" + chunked)
    url = proxy_to(upstream)
    sent = (
        b'{"model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true}, '
        b'"messages": [{"role": "user", "content": "hi"}]}'
    )
    with httpx.Client() as client:
        answers = []
        for _ in range(2):
            with client.stream("POST", url + "/v1/chat/completions", content=sent) as reply:
                answers.append(b"".join(reply.iter_raw()))
    upstream.close()
    assert answers == [b"".join(events)] * 2
    assert upstream.connections == 1
    deadline = time.monotonic() + 10
    while len(rows := read_rows(tmp_path / "log.db")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the log writer commits in the background
    usage = [(r["total_input_tokens"], r["output_tokens"], r["error"]) for r in rows]
    assert usage == [(7, 1, None)] * 2


def test_the_read_timeout_counts_from_the_last_bytes_received(
    proxy_to: Callable[..., str], tmp_path: Path
) -> None:
    # Events 0.25 s apart for 1 s in all, with a read timeout of 0.6 s: no wait between reads
    # reaches the timeout, so every event is relayed, however long the stream runs; then the
    # upstream stalls with its stream open, and the timeout ends the response with the vendor's
    # error event, as the log says.
    events = [b'data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"%d"}}]}'
              b"\n\n" % i for i in range(4)]  # fmt: skip
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
    pieces = [head + b"\r\n\r\n", *(b"%x\r\n%s\r\n" % (len(e), e) for e in events)]
    upstream = RawUpstream(lambda n: pieces, gap_s=0.25)
    url = proxy_to(upstream, read_timeout_s=0.6)
    relayed = streamed_chat(url)
    upstream.close()
    assert relayed.startswith(b"".join(events))
    assert b"did not answer in time" in relayed[len(b"".join(events)) :]
    deadline = time.monotonic() + 10
    while not (rows := read_rows(tmp_path / "log.db")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the log writer commits in the background
    assert "did not answer in time" in rows[0]["error"]
    assert rows[0]["error"].endswith("(mid-response)")


def test_the_upstream_sees_the_head_httpx_would_send(
    proxy_to: Callable[[RawUpstream], str],
) -> None:
    # Host first, then the client's headers in order (duplicates kept, hop-by-hop and the
    # proxy's own dropped, accept-encoding: identity added), then the body's Content-Length; no
    # User-Agent, Accept or Content-Type of the client library's own; the target as sent.
    upstream = RawUpstream(lambda n: response(COMPLETION, b"content-length: %d" % len(COMPLETION)))
    url = proxy_to(upstream)
    host = upstream.url.removeprefix("http://").encode()
    target = "/v1/chat/completions?api-version=2024%2D10%2D21&x=a%2Fb"
    with httpx.Client() as client:
        client.post(
            url + target,
            content=BODY,
            headers=[
                ("Authorization", "Bearer sk-test"),
                ("X-Tag", "a"),
                ("X-Tag", "b"),
                ("Connection", "keep-alive, x-hop"),
                ("X-Hop", "dropped"),
                ("Accept-Encoding", "gzip"),
            ],
        )
        client.get(url + "/v1/models")
    upstream.close()
    head, _, body = upstream.requests[0].partition(b"\r\n\r\n")
    assert body == BODY
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST " + target.encode() + b" HTTP/1.1"
    assert lines[1] == b"Host: " + host
    assert lines[-1] == b"Content-Length: %d" % len(BODY)
    names = [line.partition(b":")[0].lower() for line in lines[2:-1]]
    assert b"user-agent" in names  # the client's own (httpx's), passed through
    assert names.count(b"user-agent") == 1
    assert b"x-hop" not in names and b"connection" not in names
    assert [line for line in lines if line.lower().startswith(b"x-tag")] == [
        b"x-tag: a",
        b"x-tag: b",
    ]
    assert lines[-2] == b"accept-encoding: identity"
    assert b"accept-encoding: gzip" not in lines
    get = upstream.requests[1].split(b"\r\n")
    assert get[:2] == [b"GET /v1/models HTTP/1.1", b"Host: " + host]
    assert not any(line.lower().startswith(b"content-length") for line in get)
    assert get[-3:] == [b"accept-encoding: identity", b"", b""]  # no body follows the head


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


def test_a_pooled_connection_closed_under_a_request_is_retried_on_a_new_one(
    proxy_to: Callable[[RawUpstream], str],
) -> None:
    # The second request reaches the kept-alive connection as the upstream closes it unanswered
    # (an idle timeout firing just then): it goes out once more, on a new connection.
    ok = response(COMPLETION, b"content-length: %d" % len(COMPLETION))
    upstream = RawUpstream(lambda n: ok, drop=frozenset({1}))
    url = proxy_to(upstream)
    with httpx.Client() as client:
        answers = [client.post(url + "/v1/chat/completions", content=BODY) for _ in range(2)]
    upstream.close()
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[1].content == COMPLETION
    assert upstream.connections == 2
    assert len(upstream.requests) == 3 and upstream.requests[1] == upstream.requests[2]


def test_a_retried_request_never_goes_out_on_a_connection_kept_from_another_retry(
    proxy_to: Callable[[RawUpstream], str],
) -> None:
    # aiohttp hands a connection back to its pool once the body is read, so the retries'
    # session kept the first retry's connection, and a later retry went out on it: a connection
    # as likely to have been closed by the upstream's idle timeout as the one just dropped
    # (a rare 502 under load). Each retry opens a new connection.
    ok = response(COMPLETION, b"content-length: %d" % len(COMPLETION))
    upstream = RawUpstream(lambda n: ok, drop=frozenset({1, 4}))
    url = proxy_to(upstream)
    with httpx.Client() as client:
        answers = [client.post(url + "/v1/chat/completions", content=BODY) for _ in range(4)]
    upstream.close()
    assert [a.status_code for a in answers] == [200] * 4
    # A (requests 0, 1 dropped), B (the first retry), C (2, 3 dropped), D (the second retry)
    assert len(upstream.requests) == 6
    assert upstream.connections == 4


def test_a_new_connection_closed_unanswered_is_not_retried(
    proxy_to: Callable[[RawUpstream], str],
) -> None:
    upstream = RawUpstream(lambda n: b"", drop=frozenset({0}))
    url = proxy_to(upstream)
    answer = httpx.post(url + "/v1/chat/completions", content=BODY)
    upstream.close()
    assert answer.status_code == 502
    assert "broke the HTTP protocol" in answer.json()["error"]["message"]
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    ("framing", "missing"),
    [
        (b"transfer-encoding: chunked", "its chunked body's last chunk never came"),
        (b"content-length: 1000", "received 168 of 1000 bytes"),  # 2 events of 84 bytes
    ],
)
def test_a_stream_the_upstream_cuts_short_ends_with_a_plain_error_event(
    proxy_to: Callable[..., str], tmp_path: Path, framing: bytes, missing: str
) -> None:
    # The upstream closes the connection after two whole events, before its body's end: the
    # client's error event read aiohttp's "Response payload is not completed:
    # <TransferEncodingError: 400, message='Not enough data to satisfy transfer length
    # header.'>"; it now says what happened, as the log does.
    events = [b'data: {"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"%d"}}]}'
              b"\n\n" % i for i in range(2)]  # fmt: skip
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + framing + b"\r\n\r\n"
    chunked = framing.startswith(b"transfer")
    pieces = [head, *(b"%x\r\n%s\r\n" % (len(e), e) if chunked else e for e in events)]
    upstream = RawUpstream(lambda n: pieces, close_after=True)
    url = proxy_to(upstream)
    relayed = streamed_chat(url)
    upstream.close()
    assert len(b"".join(events)) == 168 and relayed.startswith(b"".join(events))
    error = json.loads(relayed[len(b"".join(events)) :].removeprefix(b"data: "))["error"]
    expected = (
        f"upstream openai ({upstream.url}) dropped the connection: closed before the end of the "
        f"response body ({missing}) (mid-response)"
    )
    assert (error["message"], error["type"]) == (expected, "server_error")
    deadline = time.monotonic() + 10
    while not (rows := read_rows(tmp_path / "log.db")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the log writer commits in the background
    assert rows[0]["error"] == expected
