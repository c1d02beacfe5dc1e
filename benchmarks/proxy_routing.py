"""Routing across engine replicas: fleet hit rate, load spread, routing cost, a replica kill.

Setup (every part a separate process on 127.0.0.1): ``--replicas`` (4) ``promptcache engine
serve`` processes with tinystories (``../shared/models/tinystories-656k``), behind one
``promptcache proxy --upstream URL1,...,URL4 --routing-policy P``. Each replica's KV pool holds
about 2 of the workload's 8 system prompts plus what the sequences it runs at once need
(``pool_blocks``); the ideal is one replica with 4x that pool behind the proxy.

Workload: 8 tenants, each with its own system prompt of ``--system-tokens`` tokens
(tinystories' context is 512 tokens, so the issue's 1,024 is scaled to 256 by default), and
multi-turn sessions (``--turns`` turns: each turn resends the conversation so far, the engine's
own replies included, plus a new question); ``--requests`` requests (400) at ``--concurrency``
(16): each worker runs one session at a time, sessions alternate between tenants. Requests
stream with ``stream_options.include_usage``.

Per configuration (``round_robin``, ``least_loaded``, ``prefix``, ``kv_events`` and ``ideal``)
it reports (``kv_events``: each engine also publishes KV events, ``--kv-events-endpoint`` with a
replay endpoint, and the proxy runs from a ``--config`` file naming them, the tokenizer and the
chat template):

- the fleet hit rate: sum of ``cached_tokens`` / sum of ``prompt_tokens``, from the engines'
  usage as the client received it;
- requests per replica (from the proxy's log, ``replica`` column) and max/mean;
- the proxy process's CPU per request (``/proc/PID/stat`` user + system, whole run / requests),
  of which routing is the difference to ``round_robin``;
- wall time.

Then ``prefix`` again with one replica SIGKILLed after ``--kill-at`` (40%) of the requests
finished: requests that failed before any response byte reached the client (target 0) and
those that failed mid-stream (the proxy never retries those). Last, a micro-benchmark of the
prefix policy's ``choose`` with 10,000 indexed prefixes over 4 replicas (median of repeats,
target <= 50 us per request).

Usage::

    .venv/bin/python benchmarks/proxy_routing.py
    .venv/bin/python benchmarks/proxy_routing.py --requests 200 --concurrency 8 --only prefix
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
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
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    client: httpx.AsyncClient, url: str, messages: list[dict[str, str]], out: Outcome
) -> str | None:
    body = {
        "model": "tiny",
        "messages": messages,
        "max_tokens": 12,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = False
    text = []
    try:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
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
                    text.append(choice.get("delta", {}).get("content") or "")
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
) -> Outcome:
    """Run the sessions; ``on_progress(done)`` is called after each finished request."""
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
    outcome: Outcome
    per_replica: dict[str, int]
    proxy_cpu_ms_per_request: float
    wall_s: float
    killed: str | None = None

    @property
    def hit_rate(self) -> float:
        return self.outcome.cached_tokens / max(1, self.outcome.prompt_tokens)

    @property
    def max_over_mean(self) -> float:
        counts = list(self.per_replica.values())
        return max(counts) / statistics.mean(counts) if counts else float("nan")


def run_config(
    name: str, args: argparse.Namespace, prompts: list[str], workdir: Path, *, kill: bool = False
) -> RunResult:
    ideal = name == "ideal"
    count = 1 if ideal else args.replicas
    pool = args.pool_blocks * (args.replicas if ideal else 1)
    ports = [free_port() for _ in range(count)]
    events = None
    if name == "kv_events":
        events = [(f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}")
                  for _ in ports]  # fmt: skip
    engines = [start_engine(p, pool, events[i] if events else None) for i, p in enumerate(ports)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    proxy = None
    try:
        for proc, url in zip(engines, urls, strict=True):
            wait_http(url + "/health", proc)
        db = workdir / f"{name}{'-kill' if kill else ''}.db"
        proxy_port = free_port()
        config = None
        if events is not None:
            config = kv_events_config(workdir / f"{name}.toml", urls, events)
        proxy = start_proxy(proxy_port, ",".join(urls), None if ideal else name, db, config)
        proxy_url = f"http://127.0.0.1:{proxy_port}"
        wait_http(proxy_url + "/healthz", proxy)
        killed: list[str] = []

        def on_progress(done: int) -> None:
            if kill and not killed and done >= args.requests * args.kill_at:
                victim = 1  # a replica that holds tenants: SIGKILL, no goodbye
                engines[victim].send_signal(signal.SIGKILL)
                killed.append(urls[victim])

        cpu0, t0 = cpu_seconds(proxy.pid), time.perf_counter()
        outcome = asyncio.run(
            drive(proxy_url, prompts, requests=args.requests, concurrency=args.concurrency,
                  turns=args.turns, on_progress=on_progress)
        )  # fmt: skip
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(proxy.pid) - cpu0
        proxy.send_signal(signal.SIGINT)
        proxy.wait(60)
        with sqlite3.connect(db) as conn:
            column = "upstream" if ideal else "replica"
            per_replica = dict(
                conn.execute(f"SELECT {column}, COUNT(*) FROM requests GROUP BY 1").fetchall()
            )
        total = outcome.ok + outcome.failed_before_response + outcome.failed_mid_stream
        cpu_ms = cpu * 1000 / max(1, total)
        return RunResult(name, outcome, per_replica, cpu_ms, wall, killed[0] if killed else None)
    finally:
        if proxy is not None and proxy.poll() is None:
            proxy.kill()
        for proc in engines:
            if proc.poll() is None:
                proc.terminate()
        for proc in engines:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- routing cost in-process -------------------------------------------------------------


def routing_micro_benchmark(repeats: int = 7, prefixes: int = 10_000) -> dict[str, float]:
    """Median microseconds per ``choose`` with ``prefixes`` chained hashes indexed."""
    import hashlib

    from promptcache.proxy.routing import Replica, RequestFacts, RoutingSettings
    from promptcache.proxy.routing.prefix import PrefixPolicy

    def chain(session: int, depth: int) -> list[str]:
        return [hashlib.sha256(f"{session}/{i}".encode()).hexdigest() for i in range(depth)]

    # each replica keeps a quarter: the index stays full at ``prefixes``, evicting LRU entries
    settings = RoutingSettings(max_prefixes=prefixes // 4)
    replicas = [Replica(i, f"http://r{i}") for i in range(4)]
    out = {}
    for label in ("hit", "miss"):
        timings = []
        for _ in range(repeats):
            policy = PrefixPolicy(settings)
            for s in range(prefixes // 8):  # 8 chained hashes per session
                policy.index.insert(s % 4, chain(s, 8))
            indexed = len(policy.index)  # 9,992: 4 x 2,500, less the rounding of sessions
            assert prefixes * 0.99 <= indexed <= prefixes
            if label == "hit":  # the next turn of an indexed session: 8 of 9 segments match
                facts = [RequestFacts("openai_chat", "m", [*chain(s, 8), f"{s}/9"])
                         for s in range(1000)]  # fmt: skip
            else:  # a new conversation: all 9 looked up, none found
                facts = [RequestFacts("openai_chat", "m", chain(10**6 + s, 9)) for s in range(1000)]
            t0 = time.perf_counter()
            for f in facts:
                policy.choose(f, replicas)  # lookup, load check and insert of every hash
            timings.append((time.perf_counter() - t0) / len(facts) * 1e6)
            assert len(policy.index) <= prefixes
        out[label] = statistics.median(timings)
    out["indexed"] = indexed
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--system-tokens", type=int, default=256)
    parser.add_argument("--pool-blocks", type=int, default=0,
                        help="KV blocks per replica (default: 2 system prompts + the running "
                        "sequences' tails at concurrency / replicas)")  # fmt: skip
    parser.add_argument("--kill-at", type=float, default=0.4)
    parser.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="configurations: round_robin least_loaded prefix kv_events ideal kill",
    )
    args = parser.parse_args()
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
          f"{TENANTS} tenants x {args.system_tokens}-token system prompts; {args.requests} "
          f"requests, {args.turns} turns per session, concurrency {args.concurrency}")  # fmt: skip
    micro = routing_micro_benchmark()
    print(
        f"prefix policy choose(), {micro['indexed']:.0f} prefixes indexed, 4 replicas: "
        f"{micro['hit']:.1f} us (match), {micro['miss']:.1f} us (no match) per request"
    )
    wanted = args.only or ["round_robin", "least_loaded", "prefix", "kv_events", "ideal", "kill"]
    results: dict[str, RunResult] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in ("round_robin", "least_loaded", "prefix", "kv_events", "ideal"):
            if name in wanted:
                results[name] = run_config(name, args, prompts, Path(folder))
                report(results[name])
        if "kill" in wanted:
            killed = run_config("prefix", args, prompts, Path(folder), kill=True)
            report(killed)
            print(f"  killed {killed.killed} after {args.kill_at:.0%} of the requests: "
                  f"{killed.outcome.failed_before_response} failed before any response byte, "
                  f"{killed.outcome.failed_mid_stream} failed mid-stream")  # fmt: skip
    if "prefix" in results and "ideal" in results:
        ratio = results["prefix"].hit_rate / max(1e-9, results["ideal"].hit_rate)
        print(f"prefix hit rate / ideal: {ratio:.1%} (target >= 90%)")
    if "kv_events" in results and "prefix" in results:
        print(f"kv_events hit rate {results['kv_events'].hit_rate:.1%} vs prefix "
              f"{results['prefix'].hit_rate:.1%} (target: kv_events >= prefix)")  # fmt: skip
    if "prefix" in results and "round_robin" in results:
        extra = (
            results["prefix"].proxy_cpu_ms_per_request
            - results["round_robin"].proxy_cpu_ms_per_request
        )
        print(f"proxy CPU per request, prefix - round_robin: {extra * 1000:.0f} us")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


def report(r: RunResult) -> None:
    counts = ", ".join(f"{n}" for n in sorted(r.per_replica.values(), reverse=True))
    print(
        f"{r.name + (' (kill)' if r.killed else ''):<20} hit rate {r.hit_rate:6.1%}  "
        f"({r.outcome.cached_tokens:,} / {r.outcome.prompt_tokens:,} tokens)  requests per "
        f"replica [{counts}] max/mean {r.max_over_mean:.2f}  proxy CPU "
        f"{r.proxy_cpu_ms_per_request:.2f} ms/request  {r.wall_s:.0f} s  ok {r.outcome.ok}"
    )
    reasons = Counter(r.outcome.errors)
    for error, n in reasons.most_common(3):
        print(f"    {n} x {error}")


if __name__ == "__main__":
    main()
