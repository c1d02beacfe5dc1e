"""The bare relays that benchmarks/proxy_routing.py measures as the floor (``relay``, under
uvicorn; ``relay_lean``, uvicorn with the proxy's settings; ``relay_aiohttp``, an aiohttp web
server; ``relay_httptools``, uvicorn with a client on httptools' parser; ``relay_granian`` and
``relay_pyreqwest`` need granian and pyreqwest, which are no dependencies of the project, so
they are not tested here): each passes a streamed reply through event for event and a sized
reply with its size, and sends the same body to the same replica. Real mock replicas
(benchmarks/proxy_cpu_split.py's) and the relay run as processes on 127.0.0.1. The router's CPU
counts the processes it started (granian serves from a worker process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from port_support import free_ports

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def routing() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import proxy_routing
    finally:
        sys.path.remove(str(BENCHMARKS))
    return proxy_routing


@pytest.fixture(scope="module", params=["relay", "relay_lean", "relay_aiohttp", "relay_httptools"])
def fleet(request: pytest.FixtureRequest, routing: ModuleType) -> Iterator[tuple[str, list[str]]]:
    """(relay URL, replica URLs): two mock replicas behind one of the relays."""
    *ports, relay_port = free_ports(3)
    mocks = [subprocess.Popen([sys.executable, str(BENCHMARKS / "proxy_cpu_split.py"),
                               "--serve-mock", str(p), "--event-gap-ms", "0"])
             for p in ports]  # fmt: skip
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    relay = routing.start_relay(relay_port, urls, *routing.RELAY_SERVERS[request.param])
    try:
        for proc, url in zip(mocks, urls, strict=True):
            routing.wait_http(url + "/health", proc)
        routing.wait_http(f"http://127.0.0.1:{relay_port}/healthz", relay)
        yield f"http://127.0.0.1:{relay_port}", urls
    finally:
        for proc in [relay, *mocks]:
            proc.terminate()
        for proc in [relay, *mocks]:
            proc.wait(30)


def _events(text: str) -> list[str]:
    return [block for block in text.split("\n\n") if block]


def test_a_stream_passes_through_event_for_event(fleet: tuple[str, list[str]]) -> None:
    relay, replicas = fleet
    body = {"model": "tiny", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "a story"}]}  # fmt: skip
    through = httpx.post(f"{relay}/v1/chat/completions", json=body, timeout=30)
    assert through.status_code == 200
    assert through.headers["content-type"] == "text/event-stream"
    events = _events(through.text)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert [c["choices"][0]["delta"]["content"] for c in chunks[:12]] == [" tok"] * 12
    assert chunks[12]["usage"]["total_tokens"] == 312  # the mock's usage event, unchanged
    direct = httpx.post(f"{replicas[0]}/v1/chat/completions", json=body, timeout=30)
    assert len(_events(direct.text)) == len(events)


def test_a_sized_reply_keeps_its_size_and_the_same_body_its_replica(
    fleet: tuple[str, list[str]],
) -> None:
    relay, _ = fleet
    got = httpx.get(f"{relay}/health", timeout=30)  # forwarded: the mock answers "ok"
    assert (got.status_code, got.text, got.headers.get("content-length")) == (200, "ok", "2")
    assert "chunked" not in got.headers.get("transfer-encoding", "")
    body = {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "same"}]}
    ids = []
    for _ in range(3):
        text = httpx.post(f"{relay}/v1/chat/completions", json=body, timeout=30).text
        ids.append(int(json.loads(_events(text)[0].removeprefix("data: "))["id"].split("-")[1]))
    # one replica's request counter: consecutive ids
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2]


_BURN = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
child.wait()
"""
#: the child: CPU until its own count reaches 0.3 s, then a line, then it waits for the end of
#: its stdin (the parent's, the test's pipe)
_CHILD = """
import sys, time
while time.process_time() < 0.3:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


def test_the_router_cpu_counts_the_processes_it_started(routing: ModuleType) -> None:
    with subprocess.Popen([sys.executable, "-c", _BURN, _CHILD], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as parent:  # fmt: skip
        assert parent.stdin is not None and parent.stdout is not None
        try:
            child = int(parent.stdout.readline())
            # the child's stdout is the parent's: its line comes through the same pipe
            assert parent.stdout.readline().strip() == "burnt"
            own = Path(f"/proc/{parent.pid}/stat").read_text().rsplit(")", 1)[1].split()
            # the parent itself has done next to nothing: only its child's CPU makes the total
            assert (int(own[11]) + int(own[12])) / os.sysconf("SC_CLK_TCK") < 0.2
            assert routing.cpu_seconds(child) >= 0.29
            assert routing.cpu_seconds(parent.pid) >= 0.29
        finally:
            parent.stdin.close()  # the child reads its end and exits; the parent waits for it
