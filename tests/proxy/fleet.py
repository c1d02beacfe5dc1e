"""A fleet of mock OpenAI-compatible replicas for the routing tests (tests only).

``FleetReplica`` serves ``POST /v1/chat/completions`` (JSON or SSE, in OpenAI's wire format)
and ``GET /health`` under uvicorn on a fixed 127.0.0.1 port, so it can be stopped (connections
then refused) and started again on the same address. It answers like a prefix-caching engine
would, simply: a request's prompt is ``PROMPT_TOKENS`` tokens, of which ``CACHED_TOKENS`` are
reported cached when this replica already served the same system message. Controls:

- ``health_status``: what ``/health`` answers (200 by default);
- ``hold()`` / ``release()``: requests wait (holding their connection) until released;
- ``cut_after_first_chunk``: a stream sends its first chunk, then the connection is dropped;
- ``cut_before_body``: a stream sends its status line and headers, then drops the connection
  (an engine killed while the request waited in its queue).

``received`` lists the system message of every request it got, in order.

Fixtures (import them into a test module): ``fleet``, three started replicas;
``start_fleet_proxy(replicas, **routing)``, a logging proxy whose one upstream ``fleet`` lists
them, returning ``(url, db_path, app)``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from proxy_support import read_rows
from servers import ServerThread
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from promptcache.proxy.app import build_app
from promptcache.proxy.config import ProxyConfig, UpstreamConfig
from promptcache.proxy.routing import RoutingSettings

PROMPT_TOKENS = 100
CACHED_TOKENS = 80


class FleetReplica:
    """One mock replica on ``127.0.0.1:port`` (a free port unless given)."""

    def __init__(self, port: int = 0) -> None:
        if port == 0:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.health_status = 200
        self.cut_after_first_chunk = False
        self.cut_before_body = False
        #: after a stream's first event, send nothing more until the client goes away
        self.hang_after_first_chunk = False
        #: set when a hung stream's client (the proxy) went away
        self.disconnected = threading.Event()
        self.received: list[str] = []
        self.cached_tokens_sent = 0
        self.prompt_tokens_sent = 0
        self.health_checks = 0
        self._seen: set[str] = set()
        self._gate = threading.Event()
        self._gate.set()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FleetReplica:
        """Serve (again) on ``self.port``; returns once it accepts connections."""
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", self.port))
        config = uvicorn.Config(self, log_level="critical", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            assert self._thread.is_alive() and time.monotonic() < deadline, "replica did not start"
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving: new connections are refused."""
        self._gate.set()
        if self._server is not None and self._thread is not None and self._sock is not None:
            self._server.should_exit = True
            self._thread.join(30)
            self._sock.close()
        self._server = None

    def hold(self) -> None:
        """Make new requests wait until ``release``."""
        self._gate.clear()

    def release(self) -> None:
        """Let waiting requests answer."""
        self._gate.set()

    # -- the ASGI app ---------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/health":
            self.health_checks += 1
            await _send(send, self.health_status, b"application/json", b"{}")
            return
        request = json.loads(await Request(scope, receive).body())
        messages = request["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        self.received.append(system)
        while not self._gate.is_set():
            await asyncio.sleep(0.005)
        cached = CACHED_TOKENS if system in self._seen else 0
        self._seen.add(system)
        self.cached_tokens_sent += cached
        self.prompt_tokens_sent += PROMPT_TOKENS
        usage = {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": 2,
            "total_tokens": PROMPT_TOKENS + 2,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        base = {"id": "chatcmpl-1", "created": 1, "model": request.get("model", "m")}
        if not request.get("stream"):
            payload = {
                **base,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
            await _send(send, 200, b"application/json", json.dumps(payload).encode())
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**chunk, "choices": [], "usage": usage},
        ]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        if self.cut_before_body:
            raise ConnectionAbortedError("cut before the body (test)")
        for i, event in enumerate(events):
            data = b"data: " + json.dumps(event).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
            if i == 0 and self.cut_after_first_chunk:
                raise ConnectionAbortedError("cut mid-stream (test)")  # uvicorn drops it
            if i == 0 and self.hang_after_first_chunk:
                while (await receive())["type"] != "http.disconnect":
                    pass
                self.disconnected.set()
                return
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _send(send: Send, status: int, content_type: bytes, body: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def chat(system: str, *turns: str, stream: bool = False) -> dict[str, Any]:
    """A chat body: ``system``, then alternating user / assistant ``turns`` (user first)."""
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return {"model": "m", "messages": messages, "stream": stream}


@pytest.fixture
def fleet() -> Iterator[list[FleetReplica]]:
    replicas = [FleetReplica().start() for _ in range(3)]
    yield replicas
    for replica in replicas:
        replica.stop()


@pytest.fixture
def start_fleet_proxy(tmp_path: Path) -> Iterator[Callable[..., tuple[str, Path, Any]]]:
    running: list[ServerThread] = []

    def start(replicas: list[FleetReplica], **routing: Any) -> tuple[str, Path, Any]:
        routing.setdefault("health_interval_s", 60.0)  # tests that need checks set it lower
        upstream = UpstreamConfig(
            name="fleet",
            url=replicas[0].url,
            vendor="openai_compatible",
            replicas=tuple(r.url for r in replicas),
            routing=RoutingSettings(**routing),
            connect_timeout_s=2.0,
        )
        db = tmp_path / f"fleet{len(running)}.db"
        config = ProxyConfig(
            upstreams={"fleet": upstream}, default_upstream="fleet", db_path=db,
            flush_interval_s=0.05,
        )  # fmt: skip
        app = build_app(config)
        server = ServerThread(app).__enter__()
        running.append(server)
        return server.url, db, app

    yield start
    for server in running:
        server.stop()


def send(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)


def rows_of(db: Path, app: Any, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        app.state.store.flush()
        rows = read_rows(db)
        if len(rows) >= count or time.monotonic() > deadline:
            assert len(rows) == count, rows
            return rows
        time.sleep(0.02)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)
