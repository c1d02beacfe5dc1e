"""Latency and throughput the proxy adds in front of a fast upstream, measured in one run.

Targets, all on 127.0.0.1, each a separate process (uvicorn, one worker):

- ``direct``: the fast mock upstream itself (an OpenAI-compatible chat endpoint, starlette under
  uvicorn: a JSON completion, or a 12-event SSE stream, with cache usage);
- ``proxy``: ``promptcache.proxy`` in front of it, recording to SQLite (the default);
- ``proxy-no-db``: the same without the SQLite log (``--no-log``: record hooks such as the
  metrics and cache-break explainer still run);
- ``proxy-bare``: no log and no hooks (pure forwarding);
- ``litellm``: a LiteLLM proxy in front of the same upstream, only when ``litellm[proxy]`` is
  installed.

For each target, non-streaming and streaming, at concurrency 1, 32 and 128, the load generator
(this process, httpx with keep-alive) sends the same ~4 KB chat request for ``--seconds``; each
cell is repeated ``--repeats`` times and the median of each statistic is reported: p50 and p99
latency (ms; for streams, until the last byte), and requests/s. "Added" figures are against
``direct`` in the same run. The load generator, upstream and proxy share the machine's cores, so
absolute figures are a floor for what the proxy can do, not a ceiling.

Usage::

    .venv/bin/python benchmarks/proxy_overhead.py
    .venv/bin/python benchmarks/proxy_overhead.py --seconds 2 --repeats 5 --concurrency 1 32
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

# -- the fast upstream -------------------------------------------------------------------------

_USAGE = {
    "prompt_tokens": 1100,
    "completion_tokens": 24,
    "total_tokens": 1124,
    "prompt_tokens_details": {"cached_tokens": 1024},
}
_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1764489600,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Add an index on orders(customer_id)."},
                "finish_reason": "stop",
            }
        ],
        "usage": _USAGE,
    }
).encode()


def _chunk(delta: dict[str, object], usage: object = None, choices: bool = True) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1764489600,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}] if choices else [],
        "usage": usage,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


_EVENTS = [_chunk({"role": "assistant", "content": ""})]
_EVENTS += [_chunk({"content": f"token{i} "}) for i in range(10)]
_USAGE_EVENT = _chunk({}, usage=_USAGE, choices=False)
_DONE = b"data: [DONE]\n\n"


async def _chat(request: Request) -> Response:
    """The mock's one route: a JSON completion, or a 12-event SSE stream."""
    body = await request.body()
    if b'"stream": true' not in body and b'"stream":true' not in body:
        return Response(_COMPLETION, media_type="application/json")
    usage = b'"include_usage":true' in body or b'"include_usage": true' in body

    async def events() -> AsyncIterator[bytes]:
        for event in _EVENTS:
            yield event
        if usage:
            yield _USAGE_EVENT
        yield _DONE

    return StreamingResponse(events(), media_type="text/event-stream")


#: The fast upstream: starlette under uvicorn, no sleeps.
fast_upstream = Starlette(routes=[Route("/v1/chat/completions", _chat, methods=["POST", "GET"])])


# -- processes ---------------------------------------------------------------------------------

_PROXY = """
import sys, uvicorn
from pathlib import Path
from promptcache.proxy.app import build_app
from promptcache.proxy.config import config_for_upstream
upstream, port, mode, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
http, loop = sys.argv[5], sys.argv[6]
app = build_app(config_for_upstream(upstream, db_path=Path(db) if mode == "proxy" else None))
if mode == "proxy-bare":
    app.state.record_hooks.clear()
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
            server_header=False, date_header=False, http=http, loop=loop)
"""

_UPSTREAM = """
import sys, uvicorn
sys.path.insert(0, sys.argv[2])
from proxy_overhead import fast_upstream
uvicorn.run(fast_upstream, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            access_log=False, http=sys.argv[3], loop=sys.argv[4])
"""


def resolved(setting: str, fast: str) -> str:
    """What uvicorn's ``auto`` picks: the C implementation when it is installed."""
    if setting != "auto":
        return setting
    if importlib.util.find_spec(fast) is not None:
        return fast
    return "h11" if fast == "httptools" else "asyncio"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(code: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, *args])


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "/v1/chat/completions", timeout=1)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{url} did not start") from None
            time.sleep(0.1)


# -- load --------------------------------------------------------------------------------------

SYSTEM = "You review SQL for a team of backend engineers. " * 80  # ~4 KB, ~1,000 tokens


def request_body(stream: bool) -> bytes:
    return json.dumps(
        {
            "model": "gpt-4o-2024-08-06",
            "messages": [
                {"role": "system", "content": SYSTEM},
                {
                    "role": "user",
                    "content": "Why is SELECT * FROM orders WHERE customer_id = 7 slow?",
                },
            ],
            "stream": stream,
        }
    ).encode()


@dataclass
class Cell:
    p50_ms: float
    p99_ms: float
    rps: float
    requests: int
    cpu_ms: float = 0.0  # CPU time of the target's own process per request (ms)


@dataclass
class Target:
    name: str
    url: str
    proc: subprocess.Popen[bytes]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(url: str, stream: bool, concurrency: int, seconds: float) -> Cell:
    """Keep ``concurrency`` requests in flight for ``seconds``; latency per request.

    Each in-flight slot has its own keep-alive client (one connection), so the load generator's
    own connection pool costs the same at every concurrency.
    """
    body = request_body(stream)
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [
        httpx.AsyncClient(base_url=url, limits=limits, timeout=60) for _ in range(concurrency)
    ]

    async def one(client: httpx.AsyncClient) -> None:
        if stream:
            async with client.stream("POST", "/v1/chat/completions", content=body) as r:
                async for _ in r.aiter_raw():
                    pass
        else:
            (await client.post("/v1/chat/completions", content=body)).read()

    try:
        await asyncio.gather(*(one(c) for c in clients))  # open the connections
        stop = time.perf_counter() + seconds

        async def worker(client: httpx.AsyncClient) -> None:
            while (start_at := time.perf_counter()) < stop:
                await one(client)
                latencies.append(time.perf_counter() - start_at)

        began = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - began
    finally:
        for client in clients:
            await client.aclose()
    latencies.sort()
    return Cell(
        p50_ms=1000 * latencies[len(latencies) // 2],
        p99_ms=1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        rps=len(latencies) / elapsed,
        requests=len(latencies),
    )


def median_cell(cells: list[Cell]) -> Cell:
    return Cell(
        p50_ms=statistics.median(c.p50_ms for c in cells),
        p99_ms=statistics.median(c.p99_ms for c in cells),
        rps=statistics.median(c.rps for c in cells),
        requests=sum(c.requests for c in cells),
        cpu_ms=statistics.median(c.cpu_ms for c in cells),
    )


def measure(target: Target, stream: bool, concurrency: int, seconds: float) -> Cell:
    before = cpu_seconds(target.proc.pid)
    cell = asyncio.run(load(target.url, stream, concurrency, seconds))
    cell.cpu_ms = 1000 * (cpu_seconds(target.proc.pid) - before) / max(cell.requests, 1)
    return cell


def report(
    targets: list[Target], results: dict[tuple[str, bool, int], list[Cell]], levels: list[int]
) -> None:
    print(
        "| stream | conc. | target | p50 ms | p99 ms | req/s | added p50 ms | added p99 ms "
        "| req/s vs direct | CPU ms/req |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for stream in (False, True):
        for concurrency in levels:
            base = median_cell(results[("direct", stream, concurrency)])
            for target in targets:
                cell = median_cell(results[(target.name, stream, concurrency)])
                direct = target.name == "direct"
                added = "" if direct else f"{cell.p50_ms - base.p50_ms:+.2f}"
                added99 = "" if direct else f"{cell.p99_ms - base.p99_ms:+.2f}"
                print(
                    f"| {'yes' if stream else 'no'} | {concurrency} | {target.name} "
                    f"| {cell.p50_ms:.2f} | {cell.p99_ms:.2f} | {cell.rps:.0f} | {added} "
                    f"| {added99} | {cell.rps / base.rps:.2f} | {cell.cpu_ms:.2f} |"
                )
    print()
    for stream in (False, True):
        kind = "streaming" if stream else "non-streaming"
        if 1 in levels:
            base = median_cell(results[("direct", stream, 1)])
            proxy = median_cell(results[("proxy", stream, 1)])
            print(
                f"# {kind}: added p50 at concurrency 1: "
                f"{proxy.p50_ms - base.p50_ms:+.2f} ms (target <= 1 ms)"
            )
        if 32 in levels:
            base = median_cell(results[("direct", stream, 32)])
            proxy = median_cell(results[("proxy", stream, 32)])
            print(
                f"# {kind}: req/s at concurrency 32, proxy / direct: "
                f"{proxy.rps / base.rps:.2f} (target >= 0.5)"
            )
        for concurrency in levels:
            on = median_cell(results[("proxy", stream, concurrency)])
            off = median_cell(results[("proxy-no-db", stream, concurrency)])
            print(
                f"# {kind}: logging on / off req/s at concurrency {concurrency}: "
                f"{on.rps / off.rps:.2f} (target >= 0.90)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="load per cell and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32, 128])
    parser.add_argument(
        "--http",
        choices=["auto", "h11", "httptools"],
        default="auto",
        help="uvicorn HTTP parser of every server (auto: httptools when installed)",
    )
    parser.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        default="auto",
        help="uvicorn event loop of every server (auto: uvloop when installed)",
    )
    args = parser.parse_args()

    here = str(Path(__file__).resolve().parent)
    tmp = Path(tempfile.mkdtemp(prefix="proxy-bench-"))
    up_port = free_port()
    upstream_url = f"http://127.0.0.1:{up_port}"
    server = (args.http, args.loop)  # the same uvicorn settings for the upstream and the proxies
    targets = [Target("direct", upstream_url, start(_UPSTREAM, str(up_port), here, *server))]
    for mode in ("proxy", "proxy-no-db", "proxy-bare"):
        port = free_port()
        proc = start(_PROXY, upstream_url, str(port), mode, str(tmp / "bench.db"), *server)
        targets.append(Target(mode, f"http://127.0.0.1:{port}", proc))
    litellm = importlib.util.find_spec("litellm") is not None
    try:
        for target in targets:
            wait_ready(target.url, target.proc)
        print(
            f"# proxy overhead: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f} at start; {args.seconds:g} s x "
            f"{args.repeats} repeats per cell, medians; every server on uvicorn "
            f"{uvicorn.__version__} http={resolved(args.http, 'httptools')} "
            f"loop={resolved(args.loop, 'uvloop')}"
        )
        if not litellm:
            print("# LiteLLM: not installed (pip install 'litellm[proxy]'), not measured")
        for target in targets:  # warm up: connections, tokenizer, price table, code paths
            for stream in (False, True):
                asyncio.run(load(target.url, stream, 4, 0.3))
        results: dict[tuple[str, bool, int], list[Cell]] = {}
        for stream in (False, True):
            for concurrency in args.concurrency:
                for _ in range(args.repeats):  # interleave targets so drift hits all alike
                    for target in targets:
                        cell = measure(target, stream, concurrency, args.seconds)
                        results.setdefault((target.name, stream, concurrency), []).append(cell)
        print(f"# load average at end: {os.getloadavg()[0]:.1f}\n")
        report(targets, results, args.concurrency)
    finally:
        for target in targets:
            target.proc.terminate()
        for target in targets:
            target.proc.wait(30)
    conn = sqlite3.connect(tmp / "bench.db")
    rows, with_usage = conn.execute(
        "SELECT COUNT(*), COUNT(cache_read_tokens) FROM requests"
    ).fetchone()
    conn.close()
    print(f"# logged rows: {rows}, with usage: {with_usage} (every request to `proxy`)")


if __name__ == "__main__":
    main()
