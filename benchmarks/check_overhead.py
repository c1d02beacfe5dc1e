"""What ``promptcache check`` adds to each run of a program: 200 requests, plain vs checked.

The program (written to a temporary folder) sends 200 chat completions with the official
``openai`` client, each with a ~2,000-token system prompt, one after another, and exits.

- ``plain``: the program alone, its ``OPENAI_BASE_URL`` pointed at a capture endpoint
  (``promptcache.check.capture.CaptureServer``, canned answers) with no hook and no
  perturbation: the cost of a local server that answers at once;
- ``check``: ``promptcache.check.run_check`` on the same program (2 runs: baseline and
  perturbed), each run's wall time as the runner measured it (start to exit of the child): the
  hook's start-up (``sitecustomize``, ``time-machine``), the call-site walk and headers per
  request, the perturbed clock/random/listings.

Plain and checked runs alternate, ``--repeats`` times (default 5); the overhead is the median
checked run over the median plain run, minus 1 (target: at most 10%), in wall time and in the
CPU time (user + system) of the program's processes (``RUSAGE_CHILDREN``; for a check, its two
runs' total halved). On a machine shared with other jobs wall times swing by several times from
one run to the next; CPU time is the stable figure there. Also printed: the analysis after the
runs (pairing and fingerprinting 2 x 200 requests), a once-per-check cost.

Usage::

    .venv/bin/python benchmarks/check_overhead.py
    .venv/bin/python benchmarks/check_overhead.py --repeats 3 --requests 100
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promptcache.check.capture import CaptureServer
from promptcache.check.runner import run_check

PROGRAM = """
import sys
import openai

client = openai.OpenAI()
system = "\\n".join(f"Rule {i}: answer politely and cite section {i}." for i in range(200))
for i in range(int(sys.argv[1])):
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": f"q{i}"}],
    )
    assert reply.choices[0].message.content
"""


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def plain_run(program: Path, requests: int) -> tuple[float, float]:
    """Wall and CPU seconds of one plain run (start to exit)."""
    with CaptureServer() as server:
        env = {**os.environ, **server.base_urls(), "OPENAI_API_KEY": "sk-bench"}
        cpu = children_cpu()
        started = time.perf_counter()
        subprocess.run([sys.executable, str(program), str(requests)], env=env, check=True)
        elapsed = time.perf_counter() - started
        cpu = children_cpu() - cpu
        captured = len(server.requests())
    if captured != requests:
        raise SystemExit(f"plain run: {captured} requests captured, expected {requests}")
    return elapsed, cpu


def checked_run(program: Path, requests: int) -> tuple[list[float], float, float]:
    """Per-run wall seconds of one check (2 runs), its CPU seconds per run, and the wall
    seconds spent after the runs."""
    cpu = children_cpu()
    started = time.perf_counter()
    result = run_check([sys.executable, str(program), str(requests)])
    total = time.perf_counter() - started
    cpu = (children_cpu() - cpu) / len(result.runs)
    for run in result.runs:
        captured = sum(1 for r in run.requests if r.api is not None)
        if captured != requests:
            raise SystemExit(f"checked run: {captured} requests captured, expected {requests}")
    if result.findings:
        raise SystemExit(f"the program has no cache breaker, check found {result.findings}")
    durations = [run.duration_s for run in result.runs]
    return durations, cpu, total - sum(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        program = Path(folder) / "client_200.py"
        program.write_text(PROGRAM, encoding="utf-8")
        plain: list[float] = []
        plain_cpu: list[float] = []
        checked: list[float] = []
        checked_cpu: list[float] = []
        after: list[float] = []
        for _ in range(args.repeats):
            wall, cpu = plain_run(program, args.requests)
            plain.append(wall)
            plain_cpu.append(cpu)
            runs, cpu, rest = checked_run(program, args.requests)
            checked += runs
            checked_cpu.append(cpu)
            after.append(rest)
    print(f"requests per run: {args.requests}; repeats: {args.repeats}")
    for what, base, under in (("wall", plain, checked), ("CPU", plain_cpu, checked_cpu)):
        p, c = statistics.median(base), statistics.median(under)
        for label, value, values in (("plain", p, base), ("checked", c, under)):
            shown = [round(x, 3) for x in values]
            print(f"{what}: {label} run {value:.3f} s (median of {len(values)}: {shown})")
        print(f"{what}: per-run overhead {(c / p - 1) * 100:+.1f}% (target <= 10%)")
    print(f"analysis after the runs (median): {statistics.median(after):.3f} s")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
