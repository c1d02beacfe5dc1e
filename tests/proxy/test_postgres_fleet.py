"""Four ``promptcache proxy`` processes write one Postgres log at once (a fleet).

Each proxy is a real subprocess started from a config file whose ``[log] db`` names a database
on the session's Postgres server (pg_server.py), in front of the mock vendor (upstreams.py).
Traffic goes to all four at once through httpx. Then:

- every answered request is in the log, once, and no proxy dropped a row;
- ``promptcache report``, each proxy's ``/report.json``, ``--fail-under-hit-rate`` and the sum of
  the four ``/metrics`` agree on the totals;
- ``kill -9`` of one proxy loses at most the rows it answered in its last second, and none of
  the other proxies' rows.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from port_support import free_ports
from prometheus_client.parser import text_string_to_metric_families
from proxy_support import wait_until_serving
from servers import ServerThread

from promptcache.proxy.store_postgres import PgConnection

PROXIES = 4
PROMPTCACHE = str(Path(sys.executable).parent / "promptcache")


@pytest.fixture
def fleet(tmp_path: Path, pg_url: str, mock_server: ServerThread) -> Iterator[list[Proxy]]:
    config = tmp_path / "proxy.toml"
    config.write_text(
        'default_upstream = "mock"\n'
        f'[upstreams.mock]\nurl = "{mock_server.url}"\nvendor = "anthropic"\n'
        f'[log]\ndb = "{pg_url}"\n'
    )
    proxies = []
    try:
        for port in free_ports(PROXIES):
            command = [PROMPTCACHE, "proxy", "--config", str(config), "--port", str(port)]
            proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
            proxies.append(Proxy(proc, f"http://127.0.0.1:{port}"))
        for proxy in proxies:
            wait_until_serving(proxy.proc, f"{proxy.url}/healthz", timeout_s=60)
        yield proxies
    finally:
        for proxy in proxies:
            if proxy.proc.poll() is None:
                proxy.proc.send_signal(signal.SIGINT)
        for proxy in proxies:
            proxy.proc.communicate(timeout=60)


class Proxy:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url

    def metric(self, name: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        )


def send(proxy: Proxy, i: int, client: httpx.Client) -> str:
    """One Anthropic request through ``proxy``; returns the log row id the proxy gave it."""
    response = client.post(
        f"{proxy.url}/v1/messages",
        headers={
            "x-api-key": f"sk-ant-test-{i % 3}",
            "anthropic-version": "2023-06-01",
            "x-mock-case": "cache_read_and_write_5m" if i % 4 else "cache_write_1h",
        },
        json={
            "model": "claude-sonnet-4-5",
            "max_tokens": 16,
            "system": [{"type": "text", "text": f"You are agent {i % 5}. " * 40}],
            "messages": [{"role": "user", "content": f"question {i}"}],
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.headers["x-promptcache-request-id"]


def logged_ids(pg_url: str) -> list[str]:
    with PgConnection(pg_url) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM requests")]


def wait_for_rows(pg_url: str, n: int, timeout_s: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        ids = logged_ids(pg_url)
        if len(ids) >= n or time.monotonic() > deadline:
            return ids
        time.sleep(0.2)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMPTCACHE, *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_four_proxies_share_one_log_and_every_view_agrees(fleet: list[Proxy], pg_url: str) -> None:
    n = 240
    with httpx.Client() as client, ThreadPoolExecutor(16) as pool:
        ids = list(pool.map(lambda i: send(fleet[i % PROXIES], i, client), range(n)))
    logged = wait_for_rows(pg_url, n)
    assert sorted(logged) == sorted(ids)  # all there, none twice
    assert [p.metric("promptcache_log_rows_dropped_total") for p in fleet] == [0] * PROXIES

    done = cli("report", "--db", pg_url, "--since", "1h", "--format", "json")
    assert done.returncode == 0, done.stderr
    total = json.loads(done.stdout)["total"]
    assert total["requests"] == n
    reads = sum(p.metric("promptcache_cache_read_tokens_total") for p in fleet)
    writes = sum(p.metric("promptcache_cache_write_tokens_total") for p in fleet)
    uncached = sum(p.metric("promptcache_input_tokens_total") for p in fleet)
    assert total["cache_read_tokens"] == reads > 0
    assert total["cache_write_5m_tokens"] + total["cache_write_1h_tokens"] == writes > 0
    assert total["uncached_input_tokens"] == uncached
    assert sum(p.metric("promptcache_requests_total") for p in fleet) == n
    for proxy in fleet:
        live = httpx.get(f"{proxy.url}/report.json", params={"window": "1h"}, timeout=60)
        assert live.status_code == 200, live.text
        assert {k: live.json()["total"][k] for k in total if k != "group"} == {
            k: v for k, v in total.items() if k != "group"
        }

    rate = total["token_hit_rate"]
    assert 0 < rate < 1
    above = cli(
        "report", "--db", pg_url, "--since", "1h", "--fail-under-hit-rate", f"{rate + 0.01:.4f}"
    )
    assert above.returncode == 1 and "alert: hit rate" in above.stderr
    below = cli(
        "report", "--db", pg_url, "--since", "1h", "--fail-under-hit-rate", f"{rate - 0.01:.4f}"
    )
    assert below.returncode == 0, below.stderr


def test_kill_9_of_one_proxy_loses_at_most_its_last_second(fleet: list[Proxy], pg_url: str) -> None:
    answered: list[tuple[int, str, float]] = []  # (proxy, row id, answered at)
    stop = threading.Event()
    lock = threading.Lock()

    def load(worker: int) -> None:
        i = worker
        with httpx.Client() as client:
            while not stop.is_set():
                index = i % PROXIES
                try:
                    rid = send(fleet[index], i, client)
                except (httpx.TransportError, AssertionError):
                    if index == 0:  # the killed proxy
                        i += 1
                        continue
                    raise
                with lock:
                    answered.append((index, rid, time.time()))
                i += 8

    threads = [threading.Thread(target=load, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(3.0)
        killed_at = time.time()
        fleet[0].proc.send_signal(signal.SIGKILL)
        fleet[0].proc.wait(10)
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    with lock:
        done = list(answered)
    survivors = {rid for index, rid, _ in done if index != 0}
    logged = set(wait_for_rows(pg_url, len(survivors) + 1))
    deadline = time.monotonic() + 30
    while not survivors <= logged and time.monotonic() < deadline:
        time.sleep(0.2)
        logged = set(logged_ids(pg_url))
    assert survivors <= logged  # the other proxies lost nothing
    killed = [(rid, at) for index, rid, at in done if index == 0]
    assert len(killed) > 20
    lost = [(rid, at) for rid, at in killed if rid not in logged]
    assert all(at >= killed_at - 1.0 for _, at in lost), (len(lost), killed_at)
    assert [p.metric("promptcache_log_rows_dropped_total") for p in fleet[1:]] == [0, 0, 0]
