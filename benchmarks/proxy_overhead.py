"""Latency and throughput the proxy adds in front of a fast upstream, measured in one run.

Targets, all on 127.0.0.1, each a separate process (uvicorn, one worker):

- ``direct``: the fast mock upstream itself (an OpenAI-compatible chat endpoint, starlette under
  uvicorn: a JSON completion, or a 12-event SSE stream, with cache usage);
- ``proxy``: ``promptcache.proxy`` in front of it, recording to SQLite (the default);
- ``proxy-no-db``: the same without the SQLite log (``--no-log``: record hooks such as the
  metrics and cache-break explainer still run);
- ``proxy-bare``: no log and no hooks (pure forwarding);
- ``litellm``: a LiteLLM proxy (``litellm --config ...``, its own uvicorn, one worker) in front
  of the same upstream, from a venv of its own (``--litellm-venv``, default
  ``~/.cache/promptcache-bench/litellm``) that the script creates with
  ``pip install 'litellm[proxy]'`` the first time; ``--no-litellm`` leaves it out. If the
  install or its start fails, the output says so, the other targets are still measured, and the
  script exits with status 2: no LiteLLM figures are printed that were not measured.

For each target, non-streaming and streaming, at concurrency 1, 32 and 128, the load generator
(this process, httpx with keep-alive) sends the same ~4 KB chat request for ``--seconds``; each
cell is repeated ``--repeats`` times and the median of each statistic is reported: p50 and p99
latency (ms; for streams, until the last byte), and requests/s. "Added" figures are against
``direct`` in the same run. Every target first answers one request of each kind, checked (a
200 with the mock's completion, or a stream to ``[DONE]``), so a proxy that fails fast is not
timed. The load generator, upstream and proxy share the machine's cores, so absolute figures
are a floor for what the proxy can do, not a ceiling.

Usage::

    .venv/bin/python benchmarks/proxy_overhead.py
    .venv/bin/python benchmarks/proxy_overhead.py --seconds 2 --repeats 5 --concurrency 1 32
    .venv/bin/python benchmarks/proxy_overhead.py --litellm-venv /tmp/litellm-venv
    .venv/bin/python benchmarks/proxy_overhead.py --no-litellm
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import secrets
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


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], path: str = "/v1/chat/completions", within: float = 60
) -> bool:
    """Poll ``url + path`` until anything answers; False if the process exits or time runs out."""
    deadline = time.monotonic() + within
    while True:
        try:
            httpx.get(url + path, timeout=1)
            return True
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.2)


# -- LiteLLM, from a venv of its own -------------------------------------------------------------

DEFAULT_LITELLM_VENV = Path.home() / ".cache" / "promptcache-bench" / "litellm"

_LITELLM_CONFIG = """model_list:
  - model_name: gpt-4o-2024-08-06
    litellm_params:
      model: openai/gpt-4o-2024-08-06
      api_base: {api_base}
      api_key: sk-bench
general_settings:
  master_key: {master_key}
"""

#: LiteLLM's environment: no network beyond loopback (the bundled cost map, not the remote one),
#: quiet logs.
_LITELLM_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}


def ensure_litellm(venv: Path) -> tuple[Path | None, str]:
    """The ``litellm`` executable of ``venv`` (created and ``pip install 'litellm[proxy]'``-ed
    when it lacks one) and its version; ``(None, why)`` when it cannot be had."""
    python, exe = venv / "bin" / "python", venv / "bin" / "litellm"
    version = [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"]
    if not exe.exists():
        print(f"# LiteLLM: installing 'litellm[proxy]' into {venv} (once)...", flush=True)
        steps = [[sys.executable, "-m", "venv", str(venv)]]
        steps.append([str(python), "-m", "pip", "install", "-q", "litellm[proxy]"])
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return None, f"{' '.join(step[-3:])} failed: {exc}"
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                return None, f"{' '.join(step[-3:])} exited {done.returncode}: {' / '.join(tail)}"
        if not exe.exists():
            return None, f"pip installed no {exe}"
    done = subprocess.run(version, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return None, f"litellm in {venv} does not import: {done.stderr.strip()[-300:]}"
    return exe, done.stdout.strip()


def _litellm_server(exe: Path) -> str:
    """What uvicorn picks in LiteLLM's venv (``auto``: the C parser and loop when installed)."""
    code = (
        "import importlib.util as u; print("
        "'http=' + ('httptools' if u.find_spec('httptools') else 'h11'),"
        "'loop=' + ('uvloop' if u.find_spec('uvloop') else 'asyncio'))"
    )
    done = subprocess.run([str(exe.parent / "python"), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "uvicorn settings unknown"


def start_litellm(
    exe: Path, upstream_url: str, port: int, tmp: Path
) -> tuple[subprocess.Popen[bytes], Path]:
    """``litellm`` on 127.0.0.1:``port`` routing the bench model to the mock; its log file."""
    config = tmp / "litellm.yaml"
    config.write_text(_LITELLM_CONFIG.format(api_base=upstream_url + "/v1", master_key=API_KEY))
    log = tmp / "litellm.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
             "--num_workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **_LITELLM_ENV},
        )  # fmt: skip
    return proc, log


# -- load --------------------------------------------------------------------------------------

SYSTEM = "You review SQL for a team of backend engineers. " * 80  # ~4 KB, ~1,000 tokens

#: The API key every request carries, to every target (LiteLLM's master key; the mock ignores it).
API_KEY = "sk-bench-" + secrets.token_hex(24)
HEADERS = {"authorization": f"Bearer {API_KEY}", "content-type": "application/json"}


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


async def check(url: str) -> str | None:
    """One request of each kind through ``url``; what is wrong with the answers (None: fine)."""
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as client:
        for stream in (False, True):
            r = await client.post("/v1/chat/completions", content=request_body(stream))
            text = r.text
            if r.status_code != 200:
                return f"stream={stream}: HTTP {r.status_code}: {text[:300]}"
            if stream and "data: [DONE]" not in text:
                return f"stream=True: no [DONE] in {text[:300]!r}"
            if not stream and "orders(customer_id)" not in text:
                return f"stream=False: not the mock's completion: {text[:300]}"
    return None


async def load(url: str, stream: bool, concurrency: int, seconds: float) -> Cell:
    """Keep ``concurrency`` requests in flight for ``seconds``; latency per request.

    Each in-flight slot has its own keep-alive client (one connection), so the load generator's
    own connection pool costs the same at every concurrency.
    """
    body = request_body(stream)
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [
        httpx.AsyncClient(base_url=url, headers=HEADERS, limits=limits, timeout=60)
        for _ in range(concurrency)
    ]

    async def one(client: httpx.AsyncClient) -> None:
        if stream:
            async with client.stream("POST", "/v1/chat/completions", content=body) as r:
                async for _ in r.aiter_raw():
                    pass
        else:
            r = await client.post("/v1/chat/completions", content=body)
            r.read()
        if r.status_code != 200:
            raise SystemExit(f"{url}: HTTP {r.status_code} under load")

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
    names = [t.name for t in targets]
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
        if "litellm" in names:
            for concurrency in levels:
                base = median_cell(results[("direct", stream, concurrency)])
                ours = median_cell(results[("proxy", stream, concurrency)])
                theirs = median_cell(results[("litellm", stream, concurrency)])
                print(
                    f"# {kind}, concurrency {concurrency}: added p50 / p99, proxy "
                    f"{ours.p50_ms - base.p50_ms:+.2f} / {ours.p99_ms - base.p99_ms:+.2f} ms, "
                    f"litellm {theirs.p50_ms - base.p50_ms:+.2f} / "
                    f"{theirs.p99_ms - base.p99_ms:+.2f} ms; req/s vs direct, proxy "
                    f"{ours.rps / base.rps:.2f}, litellm {theirs.rps / base.rps:.2f}"
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
        "--litellm-venv",
        type=Path,
        default=DEFAULT_LITELLM_VENV,
        help="venv with (or to install) litellm[proxy] (default: %(default)s)",
    )
    parser.add_argument("--no-litellm", action="store_true", help="do not measure LiteLLM")
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
    litellm_failed = ""
    try:
        for target in targets:
            if not wait_ready(target.url, target.proc):
                raise SystemExit(f"{target.name} at {target.url} did not start")
        print(
            f"# proxy overhead: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f} at start; {args.seconds:g} s x "
            f"{args.repeats} repeats per cell, medians; every server on uvicorn "
            f"{uvicorn.__version__} http={resolved(args.http, 'httptools')} "
            f"loop={resolved(args.loop, 'uvloop')}",
            flush=True,
        )
        for target in targets:
            if problem := asyncio.run(check(target.url)):
                raise SystemExit(f"{target.name} answers wrongly: {problem}")
        if args.no_litellm:
            print("# LiteLLM: left out (--no-litellm)")
        else:
            exe, version = ensure_litellm(args.litellm_venv.expanduser())
            if exe is None:
                litellm_failed = f"cannot be installed: {version}"
            else:
                port = free_port()
                proc, log = start_litellm(exe, upstream_url, port, tmp)
                target = Target("litellm", f"http://127.0.0.1:{port}", proc)
                targets.append(target)
                if not wait_ready(target.url, proc, "/health/liveliness", within=300):
                    tail = " / ".join(log.read_text(errors="replace").splitlines()[-5:])
                    litellm_failed = f"{version} did not start ({tail})"
                elif problem := asyncio.run(check(target.url)):
                    litellm_failed = f"{version} answers wrongly: {problem}"
                else:
                    print(
                        f"# LiteLLM {version} ({exe}): its own uvicorn, one worker, "
                        f"{_litellm_server(exe)}; model routed to the mock upstream"
                    )
                if litellm_failed:
                    targets.remove(target)
                    proc.terminate()
                    proc.wait(30)
            if litellm_failed:
                print(f"# LiteLLM: NOT MEASURED: {litellm_failed}")
        for target in targets:  # warm up: connections, tokenizer, price table, code paths
            for stream in (False, True):
                asyncio.run(load(target.url, stream, 4, 1.0))
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
    if litellm_failed:
        print(f"# LiteLLM: NOT MEASURED: {litellm_failed}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
