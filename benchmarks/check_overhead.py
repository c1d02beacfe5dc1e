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
checked run over the median plain run, minus 1 (target: at most 10%). Also printed: the
analysis after the runs (pairing and fingerprinting 2 x 200 requests), a once-per-check cost.

Usage::

    .venv/bin/python benchmarks/check_overhead.py
    .venv/bin/python benchmarks/check_overhead.py --repeats 3 --requests 100
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promptcache.check.capture import CaptureServer
from promptcache.check.runner import run_check

PROGRAM = '''
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
'''


def plain_run(program: Path, requests: int) -> float:
    """Seconds one plain run takes (start to exit)."""
    with CaptureServer() as server:
        env = {**os.environ, **server.base_urls(), "OPENAI_API_KEY": "sk-bench"}
        started = time.perf_counter()
        subprocess.run([sys.executable, str(program), str(requests)], env=env, check=True)
        elapsed = time.perf_counter() - started
        captured = len(server.requests())
    if captured != requests:
        raise SystemExit(f"plain run: {captured} requests captured, expected {requests}")
    return elapsed


def checked_run(program: Path, requests: int) -> tuple[list[float], float]:
    """Per-run seconds of one check (2 runs) and the seconds spent after the runs."""
    started = time.perf_counter()
    result = run_check([sys.executable, str(program), str(requests)])
    total = time.perf_counter() - started
    for run in result.runs:
        captured = sum(1 for r in run.requests if r.api is not None)
        if captured != requests:
            raise SystemExit(f"checked run: {captured} requests captured, expected {requests}")
    if result.findings:
        raise SystemExit(f"the program has no cache breaker, check found {result.findings}")
    durations = [run.duration_s for run in result.runs]
    return durations, total - sum(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        program = Path(folder) / "client_200.py"
        program.write_text(PROGRAM, encoding="utf-8")
        plain: list[float] = []
        checked: list[float] = []
        after: list[float] = []
        for _ in range(args.repeats):
            plain.append(plain_run(program, args.requests))
            runs, rest = checked_run(program, args.requests)
            checked += runs
            after.append(rest)
    p, c = statistics.median(plain), statistics.median(checked)
    print(f"requests per run: {args.requests}; repeats: {args.repeats}")
    print(f"plain run (median of {len(plain)}): {p:.3f} s  {[round(x, 3) for x in plain]}")
    print(f"checked run (median of {len(checked)}): {c:.3f} s  {[round(x, 3) for x in checked]}")
    print(f"per-run overhead: {(c / p - 1) * 100:+.1f}% (target <= 10%)")
    print(f"analysis after the runs (median): {statistics.median(after):.3f} s")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
