"""Where the proxy's CPU per routed request goes: its event-loop thread, its other threads (the
log writer), with the log and without it, and the proxy while idle.

Setup (each a separate process on 127.0.0.1): ``--replicas`` (4) engine-shaped mock replicas
(this script's ``--serve-mock PORT``: a raw ASGI app under uvicorn answering a streamed chat or
completions request with 12 one-token content events, the usage event when
``stream_options.include_usage`` asks for it, and ``[DONE]``, ``--event-gap-ms`` (5) apart so
that each event is its own upstream read, as a real engine's tokens are), behind one
``promptcache proxy --upstream URL1,...,URL4 --routing-policy prefix``, once with ``--db``
(the default proxy: log, explainer, metrics) and once with ``--no-log``. The load is
``benchmarks/proxy_routing.py``'s chat workload (8 tenants' documents of about 1,200
characters, 4-turn sessions, streamed with usage) at ``--concurrency`` (8), ``--requests`` (600)
requests, after as many again to warm up; ``--workload rag`` or ``completions`` sends its
single-message workloads instead (each request one tenant's document and a new question).

Per configuration it prints the proxy's CPU per request from ``/proc/PID/task/*/stat`` (user +
system, 10 ms ticks): the event-loop thread (the process's main thread) and the other threads
together (the log writer; anyio's worker threads), and the proxy's CPU per second while idle
(``--idle-s``, 20 s, before the load: uvicorn's main loop and the replicas' health checks). The
counts of streamed requests that came back whole are checked (every request must).

``--trigger-costs``: then the log writer's share: the ``--db`` run's logged rows (warm-up and
measured) are inserted again, in transactions of ``--trigger-batch`` rows (32: about what the
writer commits every 0.5 s at this pace) through the store's insert (``proxy/store.py``),
into fresh logs with every rollup trigger on ``requests``, with none, and with each insert
trigger dropped in turn, and last the way the proxy's writer inserts them (its connection's
triggers off, each batch added to the rollups by one statement a rollup:
``proxy/writer_rollups.py``); it prints the writer thread's CPU per row
(``time.thread_time``, the best of 3) for each.

``--callgrind N``: then the ``--db`` proxy once more under valgrind's callgrind (instrumented
only while ``N`` measured requests run, after ``N // 3`` to warm up: ``callgrind_control -i``),
printing its user-space instructions per request, all threads (the event loop, the log writer)
together; a count, so two commits compare on a loaded machine where CPU seconds do not. valgrind
runs the proxy some 50 times slower: give the replicas ``--event-gap-ms 25`` and
``--concurrency 2`` so that each event still arrives in its own read, as it does without
valgrind (the per-read work is a third of a request's instructions).

``--profile FILE``: the ``--db`` proxy's measured requests run under cProfile with the
``time.thread_time`` clock (the event-loop thread's CPU only; the proxy is started through this
script's ``--profiled-proxy FILE``, which turns the profiler on and off on ``SIGUSR1``) and the
stats go to ``FILE`` (read them with ``python -m pstats FILE``); that run's CPU figures include
the profiler's own cost.

Usage::

    .venv/bin/python benchmarks/proxy_cpu_split.py
    .venv/bin/python benchmarks/proxy_cpu_split.py --requests 300 --idle-s 10
    .venv/bin/python benchmarks/proxy_cpu_split.py --profile /tmp/proxy.pstats
    .venv/bin/python benchmarks/proxy_cpu_split.py --requests 300 --trigger-costs
    .venv/bin/python benchmarks/proxy_cpu_split.py --requests 40 --idle-s 1 \
        --event-gap-ms 25 --concurrency 2 --callgrind 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import proxy_routing as routing

CLOCK_TICK = os.sysconf("SC_CLK_TCK")


# -- the mock replica ----------------------------------------------------------------------


def mock_app(event_gap_s: float) -> Any:
    """An engine-shaped ASGI app: ``GET`` anything -> 200; ``POST`` a streamed chat or
    completions request -> 12 one-token events (+ usage when asked) + ``[DONE]``."""
    served = [0]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = await routing.read_body(receive)
        if scope["method"] != "POST":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")],
                }
            )
            await send({"type": "http.response.body", "body": b"ok"})
            return  # fmt: skip
        served[0] += 1
        request = json.loads(body)
        chat = scope["path"].endswith("/chat/completions")
        base = {"id": f"cmpl-{served[0]}", "created": int(time.time()), "model": "tiny",
                "object": "chat.completion.chunk" if chat else "text_completion"}  # fmt: skip
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
        for i in range(12):
            delta = {"content": " tok"} if i else {"role": "assistant", "content": " tok"}
            choice: dict[str, Any] = {"index": 0, "logprobs": None,
                                      "finish_reason": "length" if i == 11 else None}  # fmt: skip
            choice.update({"delta": delta} if chat else {"text": " tok"})
            event = {**base, "choices": [choice], **({"usage": None} if usage else {})}
            data = b"data: " + json.dumps(event).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
            await asyncio.sleep(event_gap_s)
        if usage:
            counts = {"prompt_tokens": 300, "completion_tokens": 12, "total_tokens": 312,
                      "prompt_tokens_details": {"cached_tokens": 256}}  # fmt: skip
            data = b"data: " + json.dumps({**base, "choices": [], "usage": counts}).encode()
            await send({"type": "http.response.body", "body": data + b"\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    return app


# -- measuring -----------------------------------------------------------------------------


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of process ``pid`` so far."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICK
    return out


def split(pid: int, before: dict[int, float], after: dict[int, float]) -> tuple[float, float]:
    """(event-loop thread, other threads) CPU seconds between two ``thread_cpu`` readings."""
    loop = after.get(pid, 0.0) - before.get(pid, 0.0)
    others = sum(v - before.get(t, 0.0) for t, v in after.items() if t != pid)
    return loop, others


def profiled_proxy(stats: str, cli_args: list[str]) -> None:
    """Run ``promptcache`` with ``cli_args`` in this process; ``SIGUSR1`` turns a cProfile
    profiler (``time.thread_time`` clock) on, the next one off and writes its stats to
    ``stats``."""
    import cProfile

    profiler = cProfile.Profile(time.thread_time)
    running = [False]

    def toggle(*_: Any) -> None:
        if running[0]:
            profiler.disable()
            profiler.dump_stats(stats)
        else:
            profiler.enable()
        running[0] = not running[0]

    signal.signal(signal.SIGUSR1, toggle)
    sys.argv = ["promptcache", *cli_args]
    from promptcache.cli import main as cli_main

    cli_main()


def measure(
    args: argparse.Namespace, urls: list[str], log: bool, folder: Path, profile: str | None = None
) -> None:
    port = routing.free_port()
    target = ["--db", str(folder / f"log-{port}.db")] if log else ["--no-log"]
    start = routing.CLI if profile is None else [sys.executable, __file__, "--profiled-proxy",
                                                  profile, "--"]  # fmt: skip
    proxy = subprocess.Popen(
        [*start, "proxy", "--upstream", ",".join(urls), "--routing-policy", "prefix",
         "--port", str(port), "--log-level", "error", *target],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        routing.wait_http(url + "/healthz", proxy)
        before = thread_cpu(proxy.pid)
        time.sleep(args.idle_s)
        idle_loop, idle_others = split(proxy.pid, before, thread_cpu(proxy.pid))
        rng = random.Random(0)
        prompts = [f"This is the story book of tenant {t}. "
                   + " ".join(rng.choice(routing.WORDS) for _ in range(200))
                   for t in range(routing.TENANTS)]  # fmt: skip
        runs = []
        for phase in ("warm-up", "measured"):
            if profile is not None and phase == "measured":
                proxy.send_signal(signal.SIGUSR1)  # profiler on
            before = thread_cpu(proxy.pid)
            outcome = asyncio.run(routing.drive(url, prompts, requests=args.requests,
                                                concurrency=args.concurrency, turns=4,
                                                workload=args.workload))  # fmt: skip
            runs.append((outcome, split(proxy.pid, before, thread_cpu(proxy.pid))))
        if profile is not None:
            proxy.send_signal(signal.SIGUSR1)  # profiler off, stats written
            deadline = time.monotonic() + 30
            while not Path(profile).exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        outcome, (loop, others) = runs[-1]
        if outcome.ok != args.requests:
            raise SystemExit(f"only {outcome.ok} of {args.requests} requests came back whole: "
                             f"{outcome.errors[:2]}")  # fmt: skip
        per = 1000 / args.requests
        name = ("proxy, --db" if log else "proxy, --no-log") + (" (profiled)" if profile else "")
        print(f"{name:<16} CPU per request {(loop + others) * per:.2f} ms: event-loop thread "
              f"{loop * per:.2f} ms, other threads {others * per:.2f} ms; idle "
              f"{(idle_loop + idle_others) * 1000 / args.idle_s:.2f} ms/s "
              f"({outcome.ok} requests whole)")  # fmt: skip
    finally:
        proxy.send_signal(signal.SIGINT)
        try:
            proxy.wait(30)
        except subprocess.TimeoutExpired:
            proxy.kill()


def count_instructions(args: argparse.Namespace, urls: list[str], folder: Path) -> None:
    """The ``--callgrind`` run (see the module docstring): prints instructions per request."""
    port = routing.free_port()
    out = folder / f"callgrind-{port}.out"
    proxy = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         *routing.CLI, "proxy", "--upstream", ",".join(urls), "--routing-policy", "prefix",
         "--port", str(port), "--log-level", "error", "--db", str(folder / f"log-{port}.db")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    rng = random.Random(0)
    prompts = [f"This is the story book of tenant {t}. "
               + " ".join(rng.choice(routing.WORDS) for _ in range(200))
               for t in range(routing.TENANTS)]  # fmt: skip

    def drive(requests: int) -> routing.Outcome:
        return asyncio.run(routing.drive(url, prompts, requests=requests,
                                         concurrency=args.concurrency, turns=4,
                                         workload=args.workload))  # fmt: skip

    def instrument(state: str) -> None:
        subprocess.run(["callgrind_control", "-i", state, str(proxy.pid)], check=True,
                       capture_output=True, timeout=120)  # fmt: skip

    try:
        routing.wait_http(url + "/healthz", proxy, timeout_s=900)
        drive(max(1, args.callgrind // 3))
        instrument("on")
        outcome = drive(args.callgrind)
        instrument("off")
    finally:
        proxy.send_signal(signal.SIGINT)
        try:
            proxy.wait(300)
        except subprocess.TimeoutExpired:
            proxy.kill()
    if outcome.ok != args.callgrind:
        raise SystemExit(f"only {outcome.ok} of {args.callgrind} requests came back whole "
                         f"under callgrind: {outcome.errors[:2]}")  # fmt: skip
    totals = [int(line.split()[1]) for line in out.read_text().splitlines()
              if line.startswith("totals:")]  # fmt: skip
    if not totals:
        raise SystemExit(f"callgrind wrote no totals to {out}")
    print(f"proxy, --db (callgrind) {totals[0] / args.callgrind / 1e6:.3f}M instructions per "
          f"request, user space, all threads ({outcome.ok} requests whole)")  # fmt: skip


def trigger_costs(
    source: Path, batch: int, repeats: int = 3
) -> tuple[int, list[tuple[str, float]]]:
    """(rows, [(label, microseconds of CPU per row)]) of inserting ``source``'s rows again
    (``--trigger-costs`` in the module docstring): ``all triggers``, ``no triggers``,
    ``without NAME`` for each insert trigger on ``requests``, then ``the writer's batches``."""
    import sqlite3

    from promptcache.proxy.store import _write_batch, open_log
    from promptcache.proxy.writer_rollups import take_over

    conn = sqlite3.connect(source)
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in conn.execute("SELECT * FROM requests ORDER BY rowid")]
    finally:
        conn.close()

    def per_row(drop: str | None, folder: Path) -> tuple[float, list[str]]:
        best = float("inf")
        names: list[str] = []
        for i in range(repeats):
            db = open_log(folder / f"{drop or 'all'}-{i}.db")
            names = [n for (n,) in db.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'requests'"
                " AND sql LIKE '%AFTER INSERT%' ORDER BY name")]  # fmt: skip
            for (name,) in db.conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'requests'"
            ).fetchall():
                if drop == "*" or name == drop:
                    db.conn.execute(f'DROP TRIGGER "{name}"')
            db.conn.commit()
            writer = None
            if drop == "writer":  # as the store does: a second connection, its triggers off
                fast = open_log(folder / f"{drop}-{i}.db")
                writer = take_over(fast.conn)
                writer.database = fast
            start = time.thread_time()
            for first in range(0, len(rows), batch):
                _write_batch(db, [dict(r) for r in rows[first : first + batch]], writer)
            best = min(best, (time.thread_time() - start) / len(rows) * 1e6)
            inserted = db.conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
            db.close()
            if writer is not None and writer.database is not None:
                writer.database.close()
            if inserted != len(rows):
                raise SystemExit(f"trigger costs: {inserted} of {len(rows)} rows inserted")
        return best, names

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        everything, names = per_row(None, folder)
        costs = [("all triggers", everything), ("no triggers", per_row("*", folder)[0])]
        costs += [(f"without {name}", per_row(name, folder)[0]) for name in names]
        costs.append(("the writer's batches", per_row("writer", folder)[0]))
    return len(rows), costs


def _at_least(low: float, kind: type) -> Any:
    """An argparse type: a number of ``kind`` no smaller than ``low``, else a usage error."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):  # nan compares false with everything
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} is below {low}: pass {low} or more")
        return value + 0  # -0.0 + 0 is 0.0, so "-0" is printed as "0"

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=_at_least(2, int), default=4)
    parser.add_argument("--requests", type=_at_least(1, int), default=600)
    parser.add_argument("--concurrency", type=_at_least(1, int), default=8)
    parser.add_argument("--event-gap-ms", type=_at_least(0, float), default=5.0)
    parser.add_argument("--idle-s", type=_at_least(1, float), default=20.0)
    parser.add_argument("--workload", choices=("chat", "rag", "completions"), default="chat",
                        help="proxy_routing.py's workload to send (default: chat)")  # fmt: skip
    parser.add_argument("--trigger-costs", action="store_true",
                        help="also time inserting the --db run's rows with and without each "
                        "rollup trigger")  # fmt: skip
    parser.add_argument("--trigger-batch", type=_at_least(1, int), default=32)
    parser.add_argument("--callgrind", type=_at_least(1, int), metavar="N",
                        help="also count the --db proxy's instructions per request over N "
                        "requests under valgrind's callgrind")  # fmt: skip
    parser.add_argument("--profile", metavar="FILE",
                        help="also run the --db proxy under cProfile, stats to FILE")  # fmt: skip
    parser.add_argument("--serve-mock", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--profiled-proxy", metavar="FILE", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.profiled_proxy is not None:
        profiled_proxy(args.profiled_proxy, rest[1:] if rest[:1] == ["--"] else rest)
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.callgrind is not None and not (shutil.which("valgrind") and shutil.which(
            "callgrind_control")):  # fmt: skip
        parser.error("--callgrind needs valgrind (valgrind and callgrind_control on PATH)")
    if args.serve_mock is not None:
        import uvicorn

        uvicorn.run(mock_app(args.event_gap_ms / 1000), host="127.0.0.1", port=args.serve_mock,
                    log_level="warning", access_log=False, lifespan="on")  # fmt: skip
        return
    print(f"load average {os.getloadavg()[0]:.2f}; {args.replicas} mock replicas, "
          f"{args.requests} {args.workload} requests at concurrency {args.concurrency}, events "
          f"{args.event_gap_ms:g} ms apart")  # fmt: skip
    ports = routing.free_ports(args.replicas)
    mocks = [subprocess.Popen([sys.executable, __file__, "--serve-mock", str(p),
                               "--event-gap-ms", str(args.event_gap_ms)])
             for p in ports]  # fmt: skip
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        for proc, url in zip(mocks, urls, strict=True):
            routing.wait_http(url + "/health", proc)
        with tempfile.TemporaryDirectory() as folder:
            for log in (True, False):
                measure(args, urls, log, Path(folder))
            if args.trigger_costs:
                logs = sorted(Path(folder).glob("log-*.db"))
                rows, costs = trigger_costs(logs[0], args.trigger_batch)
                print(f"log writer, {rows} logged rows inserted again in transactions of "
                      f"{args.trigger_batch}: CPU per row")  # fmt: skip
                for label, micros in costs:
                    print(f"  {label:<34} {micros:7.1f} us")
            if args.callgrind is not None:
                count_instructions(args, urls, Path(folder))
            if args.profile is not None:
                Path(args.profile).unlink(missing_ok=True)
                measure(args, urls, True, Path(folder), profile=args.profile)
                print(f"profile of the event-loop thread: {args.profile}")
    finally:
        for proc in mocks:
            proc.terminate()
        for proc in mocks:
            proc.wait(30)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
