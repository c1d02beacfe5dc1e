"""The upstream connection pool: at most max_connections, and a waiting request gets the first
connection freed on any pooled client (the proxy keeps several small clients per upstream)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from proxy_support import RunningProxy, mock_config, read_rows
from servers import ServerThread
from upstreams import MockUpstream

from promptcache.proxy.app import build_app
from promptcache.proxy.config import UpstreamConfig

BODY = b'{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "x"}]}'


def stream(url: str, delay_ms: int) -> tuple[int, float]:
    """(status, seconds) of one chat stream whose upstream waits ``delay_ms`` before each event."""
    start = time.monotonic()
    headers = {"x-mock-delay-ms": str(delay_ms)}
    with httpx.stream(
        "POST", url + "/v1/chat/completions", content=BODY, headers=headers, timeout=30
    ) as response:
        response.read()
    return response.status_code, time.monotonic() - start


def openai_upstream(url: str, **settings: float) -> dict[str, UpstreamConfig]:
    return {"openai": UpstreamConfig(name="openai", url=url, vendor="openai", **settings)}


def test_never_more_connections_than_max_connections(
    start_proxy: Callable[..., RunningProxy],
    mock_server: ServerThread,
    mock_upstream: MockUpstream,
) -> None:
    # 3 is not a multiple of the 2 connections each pooled client holds
    proxy = start_proxy(upstreams=openai_upstream(mock_server.url, max_connections=3))
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: stream(proxy.url, 40), range(8)))
    assert [status for status, _ in results] == [200] * 8
    assert mock_upstream.peak_in_flight == 3
    assert len(proxy.rows(8)) == 8


def test_a_waiting_request_takes_the_first_connection_freed_on_any_client(
    start_proxy: Callable[..., RunningProxy],
    mock_server: ServerThread,
    mock_upstream: MockUpstream,
) -> None:
    # Two long and two short streams fill all 4 connections (two clients of 2); a fifth request
    # must get a connection as soon as the short ones end, well within its 1.5 s pool timeout,
    # even though the client it would have queued on is busy with the long ones.
    proxy = start_proxy(
        upstreams=openai_upstream(mock_server.url, max_connections=4, pool_timeout_s=1.5)
    )
    with ThreadPoolExecutor(5) as pool:
        futures = []
        for delay_ms in (600, 600, 60, 60, 60):
            futures.append(pool.submit(stream, proxy.url, delay_ms))
            time.sleep(0.05)
        results = [f.result() for f in futures]
    assert [status for status, _ in results] == [200] * 5
    assert results[4][1] < 1.5
    assert mock_upstream.peak_in_flight == 4


def test_requests_still_waiting_at_shutdown_are_logged(
    tmp_path: Path, mock_server: ServerThread, mock_upstream: MockUpstream
) -> None:
    # One stream holds the only connection; two requests wait for it when the proxy stops. The
    # server cancels all three after its grace period; their rows must still reach the log,
    # each saying how far it got.
    db_path = tmp_path / "log.db"
    upstreams = openai_upstream(mock_server.url, max_connections=1, pool_timeout_s=30)
    app = build_app(mock_config(mock_server.url, db_path, upstreams=upstreams))
    server = ServerThread(app, graceful_shutdown_s=0.5).__enter__()
    outcomes: list[str] = []

    def call() -> None:
        try:
            with httpx.stream(
                "POST",
                server.url + "/v1/chat/completions",
                content=BODY,
                headers={"x-mock-fault": "hang"},
                timeout=30,
            ) as response:
                for _ in response.iter_raw():
                    pass
            outcomes.append(str(response.status_code))
        except httpx.HTTPError as exc:
            outcomes.append(type(exc).__name__)

    with ThreadPoolExecutor(3) as pool:
        for _ in range(3):
            pool.submit(call)
            time.sleep(0.2)
        server.stop()
    assert len(outcomes) == 3
    rows = read_rows(db_path)
    assert len(rows) == 3
    waiting = [r for r in rows if r["status"] is None]
    assert len(waiting) == 2
    assert all("cancelled before a response started" in r["error"] for r in waiting)
    [cut] = [r for r in rows if r["status"] is not None]
    assert cut["status"] == 200 and cut["error"].startswith("cancelled mid-response")


def test_a_request_the_upstream_refused_gives_its_connection_back(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # One connection in all: each request that finds the upstream closed must free it again,
    # so the next one is refused too (502) instead of waiting out the pool timeout (504).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    proxy = start_proxy(upstreams=openai_upstream(closed, max_connections=1, pool_timeout_s=0.3))
    statuses = [stream(proxy.url, 0)[0] for _ in range(3)]
    assert statuses == [502, 502, 502]


def test_a_request_answered_gives_its_connection_back(
    start_proxy: Callable[..., RunningProxy], mock_server: ServerThread
) -> None:
    # The same single connection, with an upstream that answers: every request is served.
    proxy = start_proxy(
        upstreams=openai_upstream(mock_server.url, max_connections=1, pool_timeout_s=0.3)
    )
    statuses = [stream(proxy.url, 0)[0] for _ in range(3)]
    assert statuses == [200, 200, 200]
