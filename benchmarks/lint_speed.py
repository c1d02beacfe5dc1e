"""How fast ``promptcache lint`` is on a large real Python tree, and how many findings it makes.

Lints the installed packages named by ``--packages`` (default: transformers, openai and
anthropic from this virtualenv's site-packages, about 8,000 files) and reports, as medians over
``--repeats`` runs in this one process:

- the baseline measured in the same run: reading and ``ast.parse``-ing every file serially (a
  linter that reports every syntax error as PC000 must at least compile every file);
- ``lint_paths(jobs=1)`` (serial) and ``lint_paths(jobs=N)`` (worker processes);
- files per second of wall-clock time, files per CPU-second (all processes), and the ratio to
  the parse baseline;
- the number of findings per rule, and the first ``--show`` findings to read.

The machine is shared: the 1-minute load average is printed before and after, since a busy
machine lowers the wall-clock rate but not the per-CPU-second rate.

Usage::

    .venv/bin/python benchmarks/lint_speed.py
    .venv/bin/python benchmarks/lint_speed.py --repeats 1 --jobs 2 --show 20
    .venv/bin/python benchmarks/lint_speed.py --path some/agent/codebase
"""

from __future__ import annotations

import argparse
import collections
import os
from pathlib import Path

from lint_real import (  # the timers of the agent-style benchmark beside it
    installed_dirs,
    parse_all,
    timed,
)

from promptcache.lint_rules import LintConfig, lint_paths
from promptcache.lint_rules.files import discover


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", nargs="+", default=["transformers", "openai", "anthropic"])
    parser.add_argument("--path", type=Path, action="append", help="lint this tree instead")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--show", type=int, default=10, help="findings to print for reading")
    parser.add_argument("--no-serial", action="store_true", help="skip the serial lint run")
    args = parser.parse_args()

    roots = args.path or installed_dirs(tuple(args.packages))
    config = LintConfig(respect_gitignore=False)
    files = discover(roots, config)
    load_before = os.getloadavg()[0]
    print(f"{len(files)} files under {', '.join(str(r) for r in roots)}")
    print(f"CPUs: {os.cpu_count()}, load average (1 min) before: {load_before:.2f}")

    rows = []
    wall, cpu, _ = timed(lambda: parse_all(files), args.repeats)
    rows.append(("baseline: read + ast.parse, serial", wall, cpu))
    runs = [("promptcache lint, jobs=1", 1)] if not args.no_serial else []
    runs.append((f"promptcache lint, jobs={args.jobs}", args.jobs))
    results = None
    for label, jobs in runs:
        wall, cpu, results = timed(
            lambda jobs=jobs: lint_paths(roots, config, jobs=jobs), args.repeats
        )
        rows.append((label, wall, cpu))

    base_wall = rows[0][1]
    print("\n| run | wall s | files/s | CPU s | files per CPU-s | wall vs parse |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, wall, cpu in rows:
        print(
            f"| {label} | {wall:.1f} | {len(files) / wall:.0f} | {cpu:.1f} | "
            f"{len(files) / cpu:.0f} | {wall / base_wall:.2f}x |"
        )
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.2f}")

    assert isinstance(results, list)
    findings = [(r, d) for r in results for d in r.diagnostics]
    by_code = collections.Counter(d.code for _, d in findings)
    print(f"findings: {len(findings)} {dict(sorted(by_code.items()))}")
    for result, d in findings[: args.show]:
        print(f"  {result.path}:{d.location.line}:{d.location.col + 1}: {d.code} {d.message}")


if __name__ == "__main__":
    main()
