"""The upstream connection pool: at most max_connections, and a waiting request gets the first
connection freed on any pooled client (the proxy keeps several small clients per upstream)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
from conftest import RunningProxy
from servers import ServerThread
from upstreams import MockUpstream

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
