"""Routing across engine replicas: fleet hit rate, load spread, routing cost, a replica kill, and
SGLang's router side by side.

Setup (every part a separate process on 127.0.0.1): ``--replicas`` (4) ``promptcache engine
serve`` processes with tinystories (``../shared/models/tinystories-656k``), behind one
``promptcache proxy --upstream URL1,...,URL4 --routing-policy P``. Each replica's KV pool holds
about 2 of the workload's 8 documents plus what the sequences it runs at once need
(``pool_blocks``); the ideal is one replica with 4x that pool behind the proxy.

The anchor: SGLang's router (``sglang-router`` from the package index, 0.3.x, policy
``cache_aware``: a radix tree of the request text per worker, Rust) in front of the same replica
processes, from a venv of its own (``--anchor-venv``, default
``~/.cache/promptcache-bench/sglang-router``) that the script creates with ``pip install
'sglang-router>=0.3,<0.4'`` the first time. If the anchor cannot be installed or started, the
script prints NOT MEASURED and exits with status 2 (``--no-anchor`` leaves it out).

Workloads (``--workloads``), 8 tenants each with its own document of ``--system-tokens`` tokens
(tinystories' context is 512 tokens, so 256 by default), ``--requests`` requests (400) at
``--concurrency`` (16), streamed with ``stream_options.include_usage``:

- ``chat``: multi-turn sessions (``--turns`` turns: each turn resends the conversation so far,
  the engine's own replies included, plus a new question), the document as the system message;
  each worker runs one session at a time, sessions alternate between tenants;
- ``rag``: one user message per request, the tenant's document then a new question (a prefix
  shared inside one message);
- ``completions``: ``/v1/completions`` prompts, the tenant's document then a new question.

The floor: ``relay``, a bare ASGI app under uvicorn (uvloop, httptools) that sends each request
to a replica picked by a hash of its body with one aiohttp session and streams the reply back
unchanged (no prefix index, no log, no metrics; this script's ``--serve-relay``): what the
server and client libraries the proxy is built on cost per request, before any of its own work.
The same relay over other server and client libraries, each run only when ``--only`` names it
(docs/benchmarks.md, "The floor under granian" and "Other server and client libraries under the
relay"):

- ``relay_lean``: uvicorn with the proxy's own settings (no ``server`` or ``date`` header);
- ``relay_aiohttp``: an aiohttp web server (its low-level ``web.Server``: aiohttp's C parser, no
  ASGI layer, no application router) with the same aiohttp client;
- ``relay_pyreqwest``: uvicorn, the upstream through pyreqwest (Rust: reqwest and hyper on a
  Tokio runtime thread; ``pip install pyreqwest``, no dependency of the project);
- ``relay_httptools``: uvicorn, the upstream through the thinnest client the project's own
  dependencies allow: kept-alive connections of the relay's own, the response parsed by
  httptools (llhttp), no timeouts or retries;
- ``relay_granian``: granian instead of uvicorn (a Rust HTTP server, its ASGI interface, one
  worker process, uvloop, HTTP/1.1; ``pip install granian``).

Per configuration (chat: ``round_robin``, ``least_loaded``, ``prefix``, ``kv_events``,
``sglang``, ``relay`` and ``ideal``; rag and completions: ``prefix``, ``sglang``, ``relay`` and
``ideal``; ``--only`` narrows them; ``kv_events``: each engine also publishes KV events,
``--kv-events-endpoint`` with a replay endpoint, and the proxy runs from a ``--config`` file
naming them, the tokenizer and the chat template) it reports:

- the fleet hit rate: sum of ``cached_tokens`` / sum of ``prompt_tokens``, from the engines'
  usage as the client received it;
- requests per replica (each engine's own count, ``promptcache_engine_requests_total`` in its
  ``/metrics``) and max/mean;
- the router process's CPU per request (``/proc/PID/stat`` user + system of it and of the
  processes it started, whole run / requests): ours is the whole proxy (logging, the
  cache-break explainer, usage and cost included), the anchor's its one process (all its
  threads), the relay's its one process (all its threads: pyreqwest's Tokio thread too; under
  granian, its main process and its worker);
- added latency at concurrency 1: the median over ``--latency-requests`` (40) identical
  non-streamed chat requests through the router, less the median of the same sent straight to
  a replica, the two alternating, after 5 warm-up requests each;
- wall time.

``--repeats N`` runs each configuration N times, the configurations alternating, and then
prints each one's median CPU per request, added latency and wall time (tokens and requests per
replica summed over the repeats).

Then (chat) ``prefix`` again with one replica SIGKILLed after ``--kill-at`` (40%) of the
requests finished: requests that failed before any response byte reached the client (target 0)
and those that failed mid-stream (the proxy never retries those). First, in-process
micro-benchmarks: the prefix policy's ``choose`` with 10,000 indexed chunks over 4 replicas
(chunk hashing included: median of repeats, target <= 50 us per request), and with
``--chunk-sizes`` the cost and granularity of chunk sizes 16 to 256 characters on a RAG prompt.

Usage::

    .venv/bin/python benchmarks/proxy_routing.py
    .venv/bin/python benchmarks/proxy_routing.py --requests 120 --concurrency 8 \
        --workloads chat rag completions --only prefix sglang relay ideal
    .venv/bin/python benchmarks/proxy_routing.py --chunk-sizes --only
    .venv/bin/python benchmarks/proxy_routing.py --workloads chat \
        --only prefix sglang relay relay_granian --latency-requests 20 --repeats 3
    .venv/bin/python benchmarks/proxy_routing.py --workloads chat --only prefix sglang \
        relay relay_pyreqwest relay_aiohttp --latency-requests 20 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".." / "shared" / "models" / "tinystories-656k"
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
BLOCK_SIZE = 16
#: KV bytes per token of tinystories in fp32: 2 (K, V) x 2 layers x 4 KV heads x 16 dims x 4 B
KV_BYTES_PER_TOKEN = 2 * 2 * 4 * 16 * 4
TENANTS = 8
WORDS = tuple(
    " ".join(
        (
            "girl boy dog cat ball tree park sun moon star happy sad big small red blue green",
            "fast slow jump run play sing dance laugh smile cry share help friend mom dad sister",
            "brother garden flower bird fish boat car truck cake apple toy box door house river",
            "hill rain snow wind light dark kind brave shy funny quiet loud soft warm cold old",
        )
    ).split(" ")
)
CLI = [sys.executable, "-c", "from promptcache.cli import main; main()"]


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1: every socket stays bound until all are
    picked, since ports asked for one at a time can repeat (the kernel picks at random), and
    two servers given one port leave one URL answered by the other's server."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds so far of process ``pid`` (all its threads) and of the
    processes it started that are still running (granian serves from a worker process), from
    Linux's /proc."""
    proc = Path(f"/proc/{pid}")
    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    for task in proc.glob("task/*/children"):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # ended since
            total += sum(cpu_seconds(int(child)) for child in task.read_text().split())
    return total


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not come up")
        time.sleep(0.2)


# -- the workload ------------------------------------------------------------------------


def tenant_prompts(system_tokens: int) -> list[str]:
    """One system prompt per tenant, ``system_tokens`` tokens of the model's tokenizer each."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    prompts = []
    for tenant in range(TENANTS):
        rng = random.Random(tenant)
        words = [f"This is the story book of tenant {tenant}."]
        while len(tokenizer.encode(" ".join(words)).ids) < system_tokens:
            words.append(rng.choice(WORDS))
        while len(tokenizer.encode(" ".join(words)).ids) > system_tokens:
            words.pop()
        prompts.append(" ".join(words))
    return prompts


def question(rng: random.Random) -> str:
    return "Tell me about the " + " and the ".join(rng.choice(WORDS) for _ in range(6)) + "."


@dataclass
class Outcome:
    """What the client saw over one run."""

    ok: int = 0
    failed_before_response: int = 0  # no status line reached the client, or an error status
    failed_mid_stream: int = 0  # a 200 stream that broke
    prompt_tokens: int = 0
    cached_tokens: int = 0
    errors: list[str] = field(default_factory=list)


async def one_request(
    client: httpx.AsyncClient,
    url: str,
    messages: list[dict[str, str]] | str,
    out: Outcome,
) -> str | None:
    """One streamed request: a chat (``messages`` a list) or a completion (a prompt string)."""
    body: dict[str, Any] = {
        "model": "tiny",
        "max_tokens": 12,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if isinstance(messages, str):
        path, body["prompt"] = "/v1/completions", messages
    else:
        path, body["messages"] = "/v1/chat/completions", messages
    started = False
    text = []
    try:
        async with client.stream("POST", f"{url}{path}", json=body) as response:
            if response.status_code != 200:
                out.failed_before_response += 1
                detail = (await response.aread())[:200]
                out.errors.append(f"HTTP {response.status_code}: {detail!r}")
                return None
            started = True
            usage = None
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise RuntimeError(str(event["error"])[:200])
                for choice in event.get("choices") or []:
                    delta = choice.get("delta", {}).get("content") or choice.get("text")
                    text.append(delta or "")
                usage = event.get("usage") or usage
            if usage is None:
                raise RuntimeError("stream ended without usage")
    except (httpx.HTTPError, RuntimeError) as exc:
        if started:
            out.failed_mid_stream += 1
        else:
            out.failed_before_response += 1
        out.errors.append(f"{type(exc).__name__}: {exc}")
        return None
    out.ok += 1
    out.prompt_tokens += usage["prompt_tokens"]
    out.cached_tokens += (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return "".join(text)


async def drive(
    url: str,
    prompts: list[str],
    *,
    requests: int,
    concurrency: int,
    turns: int,
    on_progress: Any = None,
    workload: str = "chat",
) -> Outcome:
    """Run the workload; ``on_progress(done)`` is called after each finished request."""
    if workload != "chat":
        return await drive_single(url, prompts, requests, concurrency, workload, on_progress)
    out = Outcome()
    sessions = [(i % TENANTS, i) for i in range(-(-requests // turns))]
    budget = [requests]
    done = [0]
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    for session in sessions:
        queue.put_nowait(session)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            tenant, seed = queue.get_nowait()
            rng = random.Random(seed)
            messages = [{"role": "system", "content": prompts[tenant]}]
            for _ in range(turns):
                if budget[0] <= 0:
                    return
                budget[0] -= 1
                messages.append({"role": "user", "content": question(rng)})
                reply = await one_request(client, url, messages, out)
                done[0] += 1
                if on_progress is not None:
                    on_progress(done[0])
                if reply is None:
                    break  # the session ends with its failed request
                messages.append({"role": "assistant", "content": reply})

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return out


async def drive_single(
    url: str,
    prompts: list[str],
    requests: int,
    concurrency: int,
    workload: str,
    on_progress: Any = None,
) -> Outcome:
    """``rag`` / ``completions``: each request one tenant's document and a new question, the
    tenants in turn (``rag``: one user message; ``completions``: a prompt)."""
    out = Outcome()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(i)
    done = [0]

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            text = f"{prompts[i % TENANTS]}\nQuestion: {question(random.Random(i))}"
            if workload == "rag":
                await one_request(client, url, [{"role": "user", "content": text}], out)
            else:
                await one_request(client, url, text + "\nAnswer:", out)
            done[0] += 1
            if on_progress is not None:
                on_progress(done[0])

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return out


def latency_medians_ms(router_url: str, replica_url: str, requests: int) -> tuple[float, float]:
    """(router, direct): median ms of identical non-streamed chat requests through
    ``router_url`` and sent straight to ``replica_url``: one at a time, alternating (so a change
    in the machine's load hits both), after 5 warm-up requests each. The added latency is their
    difference; both are printed, so that work a router does after its response (which may
    overlap the next direct request on a loaded machine) shows as a slower direct median."""
    body = {"model": "tiny", "max_tokens": 1, "temperature": 0,
            "messages": [{"role": "user", "content": "Once upon a time, Lily"}]}  # fmt: skip
    times: dict[str, list[float]] = {replica_url: [], router_url: []}
    with httpx.Client(timeout=60) as client:
        for i in range(5 + requests):
            for url, measured in times.items():
                t0 = time.perf_counter()
                response = client.post(f"{url}/v1/chat/completions", json=body)
                elapsed = time.perf_counter() - t0
                response.raise_for_status()
                if i >= 5:
                    measured.append(elapsed * 1000)
    return statistics.median(times[router_url]), statistics.median(times[replica_url])


def engine_requests(url: str) -> int:
    """Requests the engine at ``url`` finished (its ``promptcache_engine_requests_total``)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("promptcache_engine_requests_total{")
        )
    )


# -- the anchor: SGLang's router, from a venv of its own -------------------------------------

DEFAULT_ANCHOR_VENV = Path.home() / ".cache" / "promptcache-bench" / "sglang-router"
ANCHOR_REQUIREMENT = "sglang-router>=0.3,<0.4"


def ensure_anchor(venv: Path) -> tuple[Path | None, str]:
    """The python of ``venv`` with ``sglang_router`` (created and ``pip install``-ed when it
    lacks it) and the package's version; ``(None, why)`` when it cannot be had."""
    python = venv / "bin" / "python"
    version = [str(python), "-c",
               "import importlib.metadata as m; print(m.version('sglang-router'))"]  # fmt: skip
    probe = subprocess.run(version, capture_output=True, text=True) if python.exists() else None
    if probe is None or probe.returncode != 0:
        print(f"# anchor: installing '{ANCHOR_REQUIREMENT}' into {venv} (once)...", flush=True)
        steps = [[sys.executable, "-m", "venv", str(venv)],
                 [str(python), "-m", "pip", "install", "-q", ANCHOR_REQUIREMENT]]  # fmt: skip
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return None, f"{' '.join(step[-3:])} failed: {exc}"
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                return None, f"{' '.join(step[-3:])} exited {done.returncode}: {' / '.join(tail)}"
    done = subprocess.run(version, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return None, f"sglang-router in {venv} does not import: {done.stderr.strip()[-300:]}"
    return python, done.stdout.strip()


def start_anchor(python: Path, urls: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """SGLang's router on 127.0.0.1:``port``, policy ``cache_aware``, in front of ``urls``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(python), "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
             "--port", str(port), "--policy", "cache_aware", "--log-level", "warn",
             "--worker-urls", *urls],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


# -- the floor: a bare relay ----------------------------------------------------------------

#: request and response headers not passed on by the relay (hop-by-hop, or recomputed)
_HOP_HEADERS = frozenset({b"host", b"connection", b"keep-alive", b"transfer-encoding",
                          b"content-length", b"te", b"upgrade"})  # fmt: skip


async def read_body(receive: Any) -> bytes:
    """The whole body of an ASGI HTTP request, read message by message."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def relay_preamble(
    scope: dict[str, Any],
    receive: Any,
    send: Any,
    startup: Callable[[], Awaitable[None]] | None = None,
    shutdown: Callable[[], Awaitable[None]] | None = None,
) -> bool:
    """What every bare relay answers itself: the ASGI lifespan (``startup``/``shutdown`` run
    around it) and ``GET /healthz`` (200, ``ok``). True when the request was answered here."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if startup is not None:
                    await startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if shutdown is not None:
                    await shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return True
    if scope["path"] == "/healthz":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b"ok"})
        return True
    return False


def relay_app(urls: list[str], client: str = "aiohttp") -> Any:
    """A bare ASGI relay: each request goes to one of ``urls`` picked by the CRC-32 of its body
    (the same body, the same replica: as warm as a router's affinity keeps it; no prefix index),
    through one ``client`` (aiohttp's session; pyreqwest's, `_pyreqwest_relay_app`; or
    httptools' parser under connections of its own, `_httptools_relay_app`) with kept-alive
    connections, and its reply streams back read by read. ``GET /healthz`` answers 200
    itself."""
    import zlib

    import aiohttp

    if client == "pyreqwest":
        return _pyreqwest_relay_app(urls)
    if client == "httptools":
        return _httptools_relay_app(urls)
    state: dict[str, Any] = {"session": None}

    async def startup() -> None:
        state["session"] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), auto_decompress=False
        )

    async def shutdown() -> None:
        await state["session"].close()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if await relay_preamble(scope, receive, send, startup, shutdown):
            return
        body = await read_body(receive)
        url = urls[zlib.crc32(body) % len(urls)]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                   if k not in _HOP_HEADERS}  # fmt: skip
        target = url + scope["path"] + ("?" + scope["query_string"].decode() if
                                        scope["query_string"] else "")  # fmt: skip
        async with state["session"].request(scope["method"], target, data=body,
                                            headers=headers) as upstream:  # fmt: skip
            # the upstream's content-length stays (no chunked framing added to a sized body)
            out = [(k.lower(), v) for k, v in upstream.raw_headers
                   if k.lower() == b"content-length" or k.lower() not in _HOP_HEADERS]  # fmt: skip
            await send({"type": "http.response.start", "status": upstream.status,
                        "headers": out})  # fmt: skip
            async for chunk in upstream.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


def _pyreqwest_relay_app(urls: list[str]) -> Any:
    """`relay_app` with pyreqwest's client (Rust: reqwest and hyper on a Tokio runtime thread)
    instead of aiohttp's: no decompression, no redirects, kept-alive connections."""
    import zlib

    from pyreqwest.client import ClientBuilder

    state: dict[str, Any] = {"client": None}
    hop = {k.decode("latin-1") for k in _HOP_HEADERS} - {"content-length"}

    async def startup() -> None:
        state["client"] = (ClientBuilder().gzip(False).brotli(False).zstd(False)
                           .deflate(False).follow_redirects(False).build())  # fmt: skip

    async def shutdown() -> None:
        await state["client"].close()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if await relay_preamble(scope, receive, send, startup, shutdown):
            return
        body = await read_body(receive)
        url = urls[zlib.crc32(body) % len(urls)]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                   if k not in _HOP_HEADERS}  # fmt: skip
        target = url + scope["path"] + ("?" + scope["query_string"].decode() if
                                        scope["query_string"] else "")  # fmt: skip
        request = (state["client"].request(scope["method"], target).headers(headers)
                   .body_bytes(body).build_streamed())  # fmt: skip
        async with request as upstream:
            out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in upstream.headers.items()
                   if k not in hop]  # fmt: skip
            await send({"type": "http.response.start", "status": upstream.status,
                        "headers": out})  # fmt: skip
            reader = upstream.body_reader
            while (chunk := await reader.read_chunk()) is not None:
                await send({"type": "http.response.body", "body": bytes(chunk),
                            "more_body": True})  # fmt: skip
        await send({"type": "http.response.body", "body": b""})

    return app


class _HttptoolsConnection:
    """One kept-alive HTTP/1.1 connection of `_httptools_relay_app`'s client: the response
    parsed by httptools' C parser (llhttp), its body handed over as whatever one read held."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpResponseParser(self)
        self.transport: Any = None
        self.head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.done = False
        self.reusable = True

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done() and (self.body or self.done):
            waiter.set_result(None)

    def eof_received(self) -> None:
        self.reusable = False

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.done = True
        for future in (self.head, self.waiter):
            if future is not None and not future.done():
                future.set_exception(exc or ConnectionError("upstream closed the connection"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        assert self.head is not None
        self.reusable = self.parser.should_keep_alive()
        self.head.set_result((self.parser.get_status_code(), self.headers))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.done = True

    async def chunks(self) -> Any:
        """The body, a read's worth at a time."""
        while True:
            if self.body:
                chunk, self.body = bytes(self.body), bytearray()
                yield chunk
            elif self.done:
                return
            else:
                self.waiter = asyncio.get_running_loop().create_future()
                await self.waiter


def _httptools_relay_app(urls: list[str]) -> Any:
    """`relay_app` with the thinnest client this project's dependencies allow: keep-alive
    connections of its own (`_HttptoolsConnection`), each request head written with its body
    in one write, the response parsed by httptools; no timeouts, no retries."""
    import zlib
    from urllib.parse import urlsplit

    idle: dict[str, list[_HttptoolsConnection]] = {url: [] for url in urls}
    hosts = {url: urlsplit(url) for url in urls}

    async def connect(url: str) -> _HttptoolsConnection:
        pool = idle[url]
        while pool:
            connection = pool.pop()
            if connection.reusable and not connection.transport.is_closing():
                return connection
        split = hosts[url]
        _, connection = await asyncio.get_running_loop().create_connection(
            _HttptoolsConnection, split.hostname, split.port
        )
        return connection

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if await relay_preamble(scope, receive, send):
            return
        body = await read_body(receive)
        url = urls[zlib.crc32(body) % len(urls)]
        connection = await connect(url)
        target = scope.get("raw_path") or scope["path"].encode()
        if scope["query_string"]:
            target += b"?" + scope["query_string"]
        head = [scope["method"].encode(), b" ", target, b" HTTP/1.1\r\nhost: ",
                hosts[url].netloc.encode(), b"\r\n"]  # fmt: skip
        for k, v in scope["headers"]:
            if k not in _HOP_HEADERS:
                head += [k, b": ", v, b"\r\n"]
        head += [b"content-length: ", str(len(body)).encode(), b"\r\n\r\n", body]
        connection.head = asyncio.get_running_loop().create_future()
        connection.headers, connection.done = [], False
        connection.transport.write(b"".join(head))
        status, headers = await connection.head
        out = [(k.lower(), v) for k, v in headers
               if k.lower() == b"content-length" or k.lower() not in _HOP_HEADERS]  # fmt: skip
        await send({"type": "http.response.start", "status": status, "headers": out})
        async for chunk in connection.chunks():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        connection.head = None
        if connection.reusable:
            idle[url].append(connection)
        else:
            connection.transport.close()
        await send({"type": "http.response.body", "body": b""})

    return app


def _serve_aiohttp_relay(port: int, urls: list[str]) -> None:
    """The relay as an aiohttp web server: aiohttp's low-level ``web.Server`` (its C HTTP
    parser, no application router, no ASGI layer) on uvloop, the upstream through one aiohttp
    session, each upstream read written on as it came."""
    import zlib

    import aiohttp
    import uvloop
    from aiohttp import web

    async def main() -> None:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                        auto_decompress=False)  # fmt: skip
        hop = {k.decode("latin-1") for k in _HOP_HEADERS}

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            if request.path == "/healthz":
                return web.Response(body=b"ok")
            body = await request.read()
            url = urls[zlib.crc32(body) % len(urls)]
            headers = {k: v for k, v in request.headers.items() if k.lower() not in hop}
            async with session.request(request.method, url + request.path_qs, data=body,
                                       headers=headers) as upstream:  # fmt: skip
                response = web.StreamResponse(status=upstream.status)
                for k, v in upstream.raw_headers:
                    name = k.decode("latin-1")
                    if name.lower() not in hop:
                        response.headers.add(name, v.decode("latin-1"))
                if upstream.content_length is not None:
                    response.content_length = upstream.content_length
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            await response.write_eof()
            return response

        server = web.Server(handle, access_log=None)
        listener = await asyncio.get_running_loop().create_server(server, "127.0.0.1", port)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await stop.wait()
        finally:
            listener.close()
            await server.shutdown(5)
            await session.close()

    uvloop.run(main())


def serve_relay(port: int, urls: list[str], server: str, client: str = "aiohttp") -> None:
    """Serve the relay on 127.0.0.1:``port`` until interrupted: `relay_app` (its upstream
    through ``client``) under uvicorn (uvloop, httptools), uvicorn with the proxy's settings
    (``uvicorn_lean``: no ``server`` or ``date`` header, lifespan on) or granian (its ASGI
    interface, one worker process, uvloop, HTTP/1.1); or (``aiohttp``) an aiohttp web server
    with no ASGI layer (`_serve_aiohttp_relay`)."""
    if server == "aiohttp":
        _serve_aiohttp_relay(port, urls)
        return
    app = relay_app(urls, client)
    if server in ("uvicorn", "uvicorn_lean"):
        import uvicorn

        lean = server == "uvicorn_lean"
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                    lifespan="on", loop="uvloop", http="httptools", server_header=not lean,
                    date_header=not lean)  # fmt: skip
        return
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops

    Granian("relay", address="127.0.0.1", port=port, interface=Interfaces.ASGI,
            loop=Loops.uvloop, http=HTTPModes.http1, websockets=False,
            log_enabled=False).serve(target_loader=lambda: app, wrap_loader=False)  # fmt: skip


def start_relay(
    port: int, urls: list[str], server: str = "uvicorn", client: str = "aiohttp"
) -> subprocess.Popen[bytes]:
    """The bare relay on 127.0.0.1:``port`` in front of ``urls``, under ``server``, its
    upstream through ``client`` (`serve_relay`)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--serve-relay", str(port), "--relay-upstreams",
         ",".join(urls), "--relay-server", server, "--relay-client", client],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


# -- processes ---------------------------------------------------------------------------


def start_engine(
    port: int, pool_blocks: int, events: tuple[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """An engine replica; ``events``: (KV-event endpoint, replay endpoint) to publish on."""
    publish = [] if events is None else ["--kv-events-endpoint", events[0],
                                         "--kv-events-replay-endpoint", events[1]]  # fmt: skip
    return subprocess.Popen(
        [*CLI, "engine", "serve", "--model", str(MODEL), "--port", str(port),
         "--served-model-name", "tiny", "--chat-template", CHAT_TEMPLATE, "--threads", "1",
         "--dtype", "float32", "--block-size", str(BLOCK_SIZE),
         "--kv-cache-bytes", str(pool_blocks * BLOCK_SIZE * KV_BYTES_PER_TOKEN),
         "--log-level", "warning", *publish],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def start_proxy(
    port: int, upstream: str, policy: str | None, db: Path, config: Path | None = None
) -> subprocess.Popen[bytes]:
    """The proxy in front of ``upstream`` (URLs, comma-separated), or of ``config``'s fleet."""
    target = ["--config", str(config)] if config is not None else ["--upstream", upstream]
    args = [*CLI, "proxy", *target, "--port", str(port), "--db", str(db),
            "--log-level", "error"]  # fmt: skip
    if policy is not None and config is None:
        args += ["--routing-policy", policy]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kv_events_config(path: Path, urls: list[str], events: list[tuple[str, str]]) -> Path:
    """A proxy config routing ``urls`` by the KV events they publish on ``events``."""
    lines = [
        'default_upstream = "fleet"',
        "[upstreams.fleet]",
        f"replicas = {json.dumps(urls)}",
        'policy = "kv_events"',
        f"kv_events_endpoints = {json.dumps([e for e, _ in events])}",
        f"kv_events_replay_endpoints = {json.dumps([r for _, r in events])}",
        f"tokenizer = {json.dumps(str(MODEL))}",
        f"chat_template = {json.dumps(CHAT_TEMPLATE)}",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class RunResult:
    name: str
    workload: str
    outcome: Outcome
    per_replica: dict[str, int]
    proxy_cpu_ms_per_request: float
    wall_s: float
    killed: str | None = None
    added_latency_ms: float | None = None
    #: (router, direct) medians the added latency is the difference of, in ms
    latency_medians_ms: tuple[float, float] | None = None

    @property
    def hit_rate(self) -> float:
        return self.outcome.cached_tokens / max(1, self.outcome.prompt_tokens)

    @property
    def max_over_mean(self) -> float:
        counts = list(self.per_replica.values())
        return max(counts) / statistics.mean(counts) if counts and any(counts) else float("nan")


class AnchorError(RuntimeError):
    """SGLang's router did not start or answer."""


def run_config(
    name: str,
    workload: str,
    args: argparse.Namespace,
    prompts: list[str],
    workdir: Path,
    *,
    kill: bool = False,
    anchor: Path | None = None,
    latency: bool = False,
) -> RunResult:
    """One configuration on one workload, on fresh engine processes (cold caches)."""
    ideal = name == "ideal"
    count = 1 if ideal else args.replicas
    pool = args.pool_blocks * (args.replicas if ideal else 1)
    ports = free_ports(count * (3 if name == "kv_events" else 1))
    events = None
    if name == "kv_events":
        events = [(f"tcp://127.0.0.1:{ports[count + 2 * i]}",
                   f"tcp://127.0.0.1:{ports[count + 2 * i + 1]}")
                  for i in range(count)]  # fmt: skip
        ports = ports[:count]
    engines = [start_engine(p, pool, events[i] if events else None) for i, p in enumerate(ports)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    router = None
    try:
        for proc, url in zip(engines, urls, strict=True):
            wait_http(url + "/health", proc)
        tag = f"{workload}-{name}{'-kill' if kill else ''}"
        router_port = free_port()
        router_url = f"http://127.0.0.1:{router_port}"
        if name == "sglang":
            assert anchor is not None
            log = workdir / f"{tag}.log"
            router = start_anchor(anchor, urls, router_port, log)
            try:
                wait_http(router_url + "/health", router, timeout_s=60)
            except RuntimeError:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise AnchorError(f"did not start: {' / '.join(tail)}") from None
        elif name in RELAY_SERVERS:
            router = start_relay(router_port, urls, *RELAY_SERVERS[name])
            wait_http(router_url + "/healthz", router)
        else:
            config = None
            if events is not None:
                config = kv_events_config(workdir / f"{tag}.toml", urls, events)
            router = start_proxy(router_port, ",".join(urls), None if ideal else name,
                                 workdir / f"{tag}.db", config)  # fmt: skip
            wait_http(router_url + "/healthz", router)
        killed: list[str] = []

        def on_progress(done: int) -> None:
            if kill and not killed and done >= args.requests * args.kill_at:
                victim = 1  # a replica that holds tenants: SIGKILL, no goodbye
                engines[victim].send_signal(signal.SIGKILL)
                killed.append(urls[victim])

        cpu0, t0 = cpu_seconds(router.pid), time.perf_counter()
        outcome = asyncio.run(
            drive(router_url, prompts, requests=args.requests, concurrency=args.concurrency,
                  turns=args.turns, on_progress=on_progress, workload=workload)
        )  # fmt: skip
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(router.pid) - cpu0
        if name == "sglang" and outcome.ok == 0:
            raise AnchorError(f"answered no request: {outcome.errors[:1]}")
        per_replica = {url: engine_requests(url) for url, proc in zip(urls, engines, strict=True)
                       if proc.poll() is None}  # fmt: skip
        medians = (
            latency_medians_ms(router_url, urls[0], args.latency_requests) if latency else None
        )
        added = medians[0] - medians[1] if medians is not None else None
        total = outcome.ok + outcome.failed_before_response + outcome.failed_mid_stream
        cpu_ms = cpu * 1000 / max(1, total)
        return RunResult(name, workload, outcome, per_replica, cpu_ms, wall,
                         killed[0] if killed else None, added, medians)  # fmt: skip
    finally:
        if router is not None and router.poll() is None:
            router.send_signal(signal.SIGINT)
            try:
                router.wait(60)
            except subprocess.TimeoutExpired:
                router.kill()
        for proc in engines:
            if proc.poll() is None:
                proc.terminate()
        for proc in engines:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- routing cost in-process -------------------------------------------------------------


def _chat_body(session: int, turns: int) -> dict[str, Any]:
    rng = random.Random(session)
    messages = [{"role": "system", "content": f"Tenant {session % 8}. " + " ".join(
        rng.choice(WORDS) for _ in range(40))}]  # fmt: skip
    for turn in range(turns):
        messages.append({"role": "user", "content": question(rng)})
        messages.append({"role": "assistant", "content": f"Reply {turn} to session {session}."})
    messages.append({"role": "user", "content": question(rng)})
    return {"model": "m", "messages": messages}


def routing_micro_benchmark(repeats: int = 7, indexed: int = 10_000) -> dict[str, float]:
    """Median microseconds per ``choose`` (chunk hashing included) with ``indexed`` chunk
    hashes in the index, over 4 replicas."""
    from promptcache.fingerprint import fingerprint_request
    from promptcache.proxy.routing import Replica, RequestFacts, RoutingSettings
    from promptcache.proxy.routing.prefix import PrefixPolicy

    # each replica keeps a quarter: the index stays full at ``indexed``, evicting LRU entries
    settings = RoutingSettings(max_prefixes=indexed // 4)
    replicas = [Replica(i, f"http://r{i}") for i in range(4)]
    sessions = 1000
    fills = [fingerprint_request(_chat_body(s, 2), "openai_chat") for s in range(sessions)]
    nexts = [fingerprint_request(_chat_body(s, 3), "openai_chat") for s in range(sessions)]
    news = [fingerprint_request(_chat_body(10**6 + s, 3), "openai_chat") for s in range(sessions)]
    out: dict[str, float] = {}
    for label, fingerprints in (("hit", nexts), ("miss", news)):
        timings = []
        for _ in range(repeats):
            policy = PrefixPolicy(settings)
            for replica in replicas:
                replica.routed = 0
            for fp in fills:  # the Router counts routed requests: ties spread by it
                chosen = policy.choose(RequestFacts("openai_chat", "m", fingerprint=fp), replicas)
                chosen.replica.routed += 1
            size = len(policy.index)
            assert indexed * 0.99 <= size <= indexed, size
            facts = [RequestFacts("openai_chat", "m", fingerprint=fp) for fp in fingerprints]
            t0 = time.perf_counter()
            for f in facts:  # chunk hashing, the lookups, the load check, the insert
                policy.choose(f, replicas).replica.routed += 1
            timings.append((time.perf_counter() - t0) / len(facts) * 1e6)
        out[label] = statistics.median(timings)
        out["chunks"] = statistics.mean(len(chunk_count(fp)) for fp in fingerprints)
    out["indexed"] = size
    return out


def chunk_count(fingerprint: Any) -> list[int]:
    from promptcache.proxy.routing.chunks import chunked_prompt

    return list(chunked_prompt(fingerprint).hashes)


def chunk_size_table(prompts: list[str], repeats: int = 5) -> list[tuple[int, float, int, float]]:
    """Per chunk size (characters): microseconds to hash a RAG request's prompt stream (median),
    chunks per request, and the shared prefix its chunks cannot match (mean characters between
    the end of the last whole shared chunk and the first differing character, over pairs of
    requests sharing a document)."""
    from promptcache.fingerprint import fingerprint_request
    from promptcache.proxy.routing.chunks import chunk_hashes

    streams = []
    for i in range(64):
        text = f"{prompts[i % TENANTS]}\nQuestion: {question(random.Random(i))}"
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        streams.append([s.text for s in fingerprint_request(body, "openai_chat").segments])
    rows = []
    for size in (16, 32, 64, 128, 256):
        timings = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for pieces in streams:
                chunk_hashes(pieces, size)
            timings.append((time.perf_counter() - t0) / len(streams) * 1e6)
        lost = []
        for a, b in zip(streams[:-TENANTS], streams[TENANTS:], strict=True):  # same document
            x, y = "".join(a), "".join(b)
            common = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q),
                          min(len(x), len(y)))  # fmt: skip
            lost.append(common - common // size * size)
        chunks = statistics.mean(len(chunk_hashes(p, size)) for p in streams)
        rows.append((size, statistics.median(timings), round(chunks), statistics.mean(lost)))
    return rows


#: the bare relay's configurations: (server, upstream client) each runs with (`serve_relay`)
RELAY_SERVERS = {
    "relay": ("uvicorn", "aiohttp"),
    "relay_lean": ("uvicorn_lean", "aiohttp"),
    "relay_aiohttp": ("aiohttp", "aiohttp"),
    "relay_pyreqwest": ("uvicorn", "pyreqwest"),
    "relay_httptools": ("uvicorn", "httptools"),
    "relay_granian": ("granian", "aiohttp"),
}
#: relay configurations run only when ``--only`` names them, and the package each needs
#: beyond the project's own
RELAY_OPTIONAL = {"relay_lean": None, "relay_aiohttp": None, "relay_pyreqwest": "pyreqwest",
                  "relay_httptools": None, "relay_granian": "granian"}  # fmt: skip
CHAT_CONFIGS = ("round_robin", "least_loaded", "prefix", "kv_events", "sglang", *RELAY_SERVERS,
                "ideal")  # fmt: skip
SINGLE_CONFIGS = ("prefix", "sglang", *RELAY_SERVERS, "ideal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--system-tokens", type=int, default=256)
    parser.add_argument("--pool-blocks", type=int, default=0,
                        help="KV blocks per replica (default: 2 documents + the running "
                        "sequences' tails at concurrency / replicas)")  # fmt: skip
    parser.add_argument("--kill-at", type=float, default=0.4)
    parser.add_argument("--latency-requests", type=int, default=40,
                        help="requests per median of the added-latency measurement")  # fmt: skip
    parser.add_argument("--workloads", nargs="+", default=["chat", "rag", "completions"],
                        choices=["chat", "rag", "completions"])  # fmt: skip
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="configurations: round_robin least_loaded prefix kv_events sglang relay "
        "relay_lean relay_aiohttp relay_pyreqwest relay_granian ideal kill (rag and "
        "completions run prefix, sglang, the relays and ideal only; relay_lean, relay_aiohttp, "
        "relay_pyreqwest and relay_granian run only when named here)",
    )
    parser.add_argument(
        "--anchor-venv",
        type=Path,
        default=DEFAULT_ANCHOR_VENV,
        help="venv with (or to install) sglang-router (default: %(default)s)",
    )
    parser.add_argument("--no-anchor", action="store_true", help="do not run SGLang's router")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each configuration, alternating; the summary gives the "
                        "median CPU per request and added latency")  # fmt: skip
    parser.add_argument("--chunk-sizes", action="store_true",
                        help="also measure chunk sizes 16-256 on a RAG prompt")  # fmt: skip
    parser.add_argument("--serve-relay", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--relay-upstreams", default="", help=argparse.SUPPRESS)
    parser.add_argument("--relay-server", default="uvicorn",
                        choices=["uvicorn", "uvicorn_lean", "granian", "aiohttp"],
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--relay-client", default="aiohttp",
                        choices=["aiohttp", "pyreqwest", "httptools"],
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    if args.serve_relay is not None:
        serve_relay(
            args.serve_relay, args.relay_upstreams.split(","), args.relay_server, args.relay_client
        )
        return
    if not args.pool_blocks:
        prompt_blocks = -(-args.system_tokens // BLOCK_SIZE)
        # a session's tail: its turns (question ~30 tokens + reply 12 + template) past the prompt
        tail_blocks = -(-(args.turns * 50) // BLOCK_SIZE)
        running = -(-args.concurrency // args.replicas)
        args.pool_blocks = 2 * prompt_blocks + running * tail_blocks
    prompts = tenant_prompts(args.system_tokens)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{args.replicas} replicas x {args.pool_blocks} KV blocks of {BLOCK_SIZE} tokens; "
          f"{TENANTS} tenants x {args.system_tokens}-token documents; {args.requests} "
          f"requests per run, {args.turns} turns per chat session, concurrency "
          f"{args.concurrency}")  # fmt: skip
    micro = routing_micro_benchmark()
    print(
        f"prefix policy choose(), {micro['indexed']:.0f} chunks indexed, 4 replicas, "
        f"{micro['chunks']:.0f} chunks per request: {micro['hit']:.1f} us (next turn), "
        f"{micro['miss']:.1f} us (new conversation) per request, chunk hashing included"
    )
    if args.chunk_sizes:
        print("chunk size | us to hash a RAG request | chunks | shared chars left unmatched")
        for size, us, chunks, lost in chunk_size_table(prompts):
            print(f"{size:10} | {us:24.1f} | {chunks:6} | {lost:.1f}")
    defaults = [name for name in CHAT_CONFIGS if name not in RELAY_OPTIONAL]
    wanted = set(args.only if args.only is not None else [*defaults, "kill"])
    for name, package in RELAY_OPTIONAL.items():
        if name in wanted and package and importlib.util.find_spec(package) is None:
            print(f"{name}: NOT MEASURED: {package} is not installed (pip install {package})")
            wanted.discard(name)
    anchor = None
    anchor_failed = ""
    if "sglang" in wanted and not args.no_anchor:
        anchor, version = ensure_anchor(args.anchor_venv.expanduser())
        if anchor is None:
            anchor_failed = f"cannot be installed: {version}"
        else:
            print(f"anchor: sglang-router {version} ({anchor}), policy cache_aware")
    elif "sglang" in wanted:
        print("anchor: left out (--no-anchor)")
    runs: dict[tuple[str, str], list[RunResult]] = {}
    timed = ("prefix", "sglang", *RELAY_SERVERS)
    with tempfile.TemporaryDirectory() as folder:
        for workload in args.workloads:
            configs = CHAT_CONFIGS if workload == "chat" else SINGLE_CONFIGS
            for _ in range(args.repeats):  # the configurations alternate, repeat by repeat
                for name in configs:
                    if name not in wanted or (name == "sglang" and anchor is None):
                        continue
                    latency = workload == args.workloads[0] and name in timed
                    try:
                        result = run_config(name, workload, args, prompts, Path(folder),
                                            anchor=anchor, latency=latency)  # fmt: skip
                    except AnchorError as exc:
                        anchor_failed, anchor = str(exc), None
                        print(f"{workload:<12} sglang: NOT MEASURED: {exc}")
                        continue
                    runs.setdefault((workload, name), []).append(result)
                    report(result)
            if workload == "chat" and "kill" in wanted:
                killed = run_config("prefix", workload, args, prompts, Path(folder), kill=True)
                report(killed)
                print(f"  killed {killed.killed} after {args.kill_at:.0%} of the requests: "
                      f"{killed.outcome.failed_before_response} failed before any response byte, "
                      f"{killed.outcome.failed_mid_stream} failed mid-stream")  # fmt: skip
    results = {key: median_result(repeats) for key, repeats in runs.items()}
    if args.repeats > 1:
        print(f"medians over {args.repeats} alternating repeats:")
        for result in results.values():
            report(result)
    summarise(results, args.workloads)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if anchor_failed:
        print(f"anchor (sglang-router): NOT MEASURED: {anchor_failed}", file=sys.stderr)
        raise SystemExit(2)


def median_result(runs: list[RunResult]) -> RunResult:
    """One configuration's repeats as one result: the median CPU per request and added latency
    (and the medians of its router and direct medians), the tokens and replica counts summed."""
    first = runs[0]
    outcome = Outcome(
        ok=sum(r.outcome.ok for r in runs),
        failed_before_response=sum(r.outcome.failed_before_response for r in runs),
        failed_mid_stream=sum(r.outcome.failed_mid_stream for r in runs),
        prompt_tokens=sum(r.outcome.prompt_tokens for r in runs),
        cached_tokens=sum(r.outcome.cached_tokens for r in runs),
        errors=[e for r in runs for e in r.outcome.errors],
    )
    per_replica = Counter[str]()
    for r in runs:  # fresh ports each run: the counts add up by rank, busiest first
        for rank, n in enumerate(sorted(r.per_replica.values(), reverse=True)):
            per_replica[f"#{rank}"] += n
    timed = [r.latency_medians_ms for r in runs if r.latency_medians_ms is not None]
    medians = None
    if timed:
        medians = (statistics.median(t[0] for t in timed), statistics.median(t[1] for t in timed))
    added = [r.added_latency_ms for r in runs if r.added_latency_ms is not None]
    return RunResult(
        first.name,
        first.workload,
        outcome,
        dict(per_replica),
        statistics.median(r.proxy_cpu_ms_per_request for r in runs),
        statistics.median(r.wall_s for r in runs),
        added_latency_ms=statistics.median(added) if added else None,
        latency_medians_ms=medians,
    )


def summarise(results: dict[tuple[str, str], RunResult], workloads: list[str]) -> None:
    """The targets, per workload, from the runs that were made."""
    for workload in workloads:
        ours, theirs = results.get((workload, "prefix")), results.get((workload, "sglang"))
        ideal = results.get((workload, "ideal"))
        if ours is not None and ideal is not None:
            ratio = ours.hit_rate / max(1e-9, ideal.hit_rate)
            print(f"{workload}: prefix hit rate / ideal: {ratio:.1%} (target >= 90%)")
        if ours is not None and theirs is not None:
            print(f"{workload}: hit rate prefix {ours.hit_rate:.1%} vs sglang "
                  f"{theirs.hit_rate:.1%} (target: at least the anchor's); router CPU per "
                  f"request {ours.proxy_cpu_ms_per_request:.2f} vs "
                  f"{theirs.proxy_cpu_ms_per_request:.2f} ms")  # fmt: skip
            if ours.added_latency_ms is not None and theirs.added_latency_ms is not None:
                print(f"{workload}: added p50 latency at concurrency 1: prefix "
                      f"{ours.added_latency_ms:+.2f} ms vs sglang "
                      f"{theirs.added_latency_ms:+.2f} ms")  # fmt: skip
        for name, (server, client) in RELAY_SERVERS.items():
            floor = results.get((workload, name))
            if floor is None:
                continue
            added = (f"; added p50 {floor.added_latency_ms:+.2f} ms"
                     if floor.added_latency_ms is not None else "")  # fmt: skip
            print(f"{workload}: the floor (bare {server} + {client} relay, no index, no log): "
                  f"CPU per request {floor.proxy_cpu_ms_per_request:.2f} ms{added}")  # fmt: skip
    chat = {name: r for (w, name), r in results.items() if w == "chat"}
    if "kv_events" in chat and "prefix" in chat:
        print(f"chat: kv_events hit rate {chat['kv_events'].hit_rate:.1%} vs prefix "
              f"{chat['prefix'].hit_rate:.1%} (target: kv_events >= prefix)")  # fmt: skip
    if "prefix" in chat and "round_robin" in chat:
        extra = (
            chat["prefix"].proxy_cpu_ms_per_request - chat["round_robin"].proxy_cpu_ms_per_request
        )
        print(f"chat: proxy CPU per request, prefix - round_robin: {extra * 1000:.0f} us")


def report(r: RunResult) -> None:
    counts = ", ".join(f"{n}" for n in sorted(r.per_replica.values(), reverse=True))
    latency = ""
    if r.added_latency_ms is not None and r.latency_medians_ms is not None:
        router, direct = r.latency_medians_ms
        latency = (f"  added p50 {r.added_latency_ms:+.2f} ms (router {router:.2f} ms, direct "
                   f"{direct:.2f} ms)")  # fmt: skip
    print(
        f"{r.workload:<12} {r.name + (' (kill)' if r.killed else ''):<20} hit rate "
        f"{r.hit_rate:6.1%}  "
        f"({r.outcome.cached_tokens:,} / {r.outcome.prompt_tokens:,} tokens)  requests per "
        f"replica [{counts}] max/mean {r.max_over_mean:.2f}  router CPU "
        f"{r.proxy_cpu_ms_per_request:.2f} ms/request  {r.wall_s:.0f} s  ok {r.outcome.ok}"
        f"{latency}"
    )
    reasons = Counter(r.outcome.errors)
    for error, n in reasons.most_common(3):
        print(f"    {n} x {error}")


if __name__ == "__main__":
    main()
