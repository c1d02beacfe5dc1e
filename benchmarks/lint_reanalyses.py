"""Why a cold ``promptcache lint`` analyses files again, and what each reason costs.

Runs a serial cold ``lint_program(files, config, 1, None)`` over each tree given (as
``lint_paths`` discovers its files, ``respect_gitignore`` off, tests left out), times every
analysis (process CPU of ``program._run_task``) and sorts it by what differs between its task
and the file's previous one:

- ``first``: the file's first analysis (round 0, every file, with no summaries seen);
- ``requests only, last compiled``: only the symbols asked of it grew, and its last analysis
  only compiled it (nothing triggered, forced or asked for it then): its first real analysis;
- ``requests only, last analysed``: only the symbols asked of it grew, after an analysis that
  ran: the most that answering new requests from a kept analysis could save (the analysis of
  the new requests themselves would still run);
- ``summaries seen changed``: the summaries of other modules it sees differ (with or without
  new requests);
- ``sink calls or forcing changed``: it calls a newly found sink function or is forced (with
  or without the other changes), split three ways: ``..., last compiled`` (its last analysis
  only compiled it: its first analysis that runs, forced or asked for symbols), ``..., inputs
  changed where read`` (after an analysis that ran; its requests, or its summaries seen in a
  part that analysis read, changed too: it runs for those whatever its sink calls) and ``...
  only`` (after an analysis that ran, nothing else it read changed: the most that skipping a
  re-analysis for sink calls that change nothing could save; how many of these gave the last
  output again, but for the sink calls and forcing it records, is printed beside);
- ``other``: the message classes no module sends changed, or nothing did.

Also prints the fixpoint's waves (``MAX_WAVES`` is the cap), the analysis CPU, the process
CPU of the whole run and of a parse-only pass (read + ``ast.parse`` of every file, serially,
the anchor of ``lint_real.py``; the faster of two passes). Findings are not printed.

Usage::

    .venv/bin/python benchmarks/lint_reanalyses.py ../corpus-trees/khoj ../corpus-trees/nanobot

To measure a commit whatever the work tree holds, run it with ``PYTHONPATH`` an export of that
commit (see docs/benchmarks.md, "Lint on real agent trees").
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from promptcache.lint_rules import LintConfig
from promptcache.lint_rules.analysis import program
from promptcache.lint_rules.analysis.reads import InputReads, same_where_read
from promptcache.lint_rules.files import discover

ORDER = (
    "first",
    "requests only, last compiled",
    "requests only, last analysed",
    "summaries seen changed",
    "sink calls or forcing changed, last compiled",
    "sink calls or forcing changed, inputs changed where read",
    "sink calls or forcing changed only",
    "other",
)


def reason(last: tuple[program.Task, dict[str, Any], InputReads] | None, task: program.Task) -> str:
    """Which of ``ORDER`` a task falls under, given the file's previous task, output and what
    that analysis read of its summaries."""
    if last is None:
        return "first"
    before, output, reads = last
    if before.force != task.force or before.sink_calls != task.sink_calls:
        if not output.get("exports"):
            return "sink calls or forcing changed, last compiled"
        if before.requests != task.requests or not same_where_read(
            before.externals, task.externals, output.get("wanted", {}), reads
        ):
            return "sink calls or forcing changed, inputs changed where read"
        return "sink calls or forcing changed only"
    if before.externals != task.externals:
        return "summaries seen changed"
    if before.requests != task.requests:
        # an analysis that ran always exports its imports' aliases; a compiled-only one nothing
        ran = bool(output.get("exports"))
        return "requests only, last analysed" if ran else "requests only, last compiled"
    return "other"


def measure(tree: Path) -> dict[str, Any]:
    """One serial cold run over ``tree``: per reason, analyses and CPU seconds."""
    tree = tree.resolve()
    config = LintConfig(root=tree, respect_gitignore=False)
    os.chdir(tree)
    names = [os.path.relpath(p) for p in discover([tree], config)]
    parse_cpu = float("inf")
    for _ in range(2):  # the first pass may read the files from disk: the faster is kept
        t0 = time.process_time()
        for name in names:
            with contextlib.suppress(SyntaxError, ValueError):
                ast.parse(Path(name).read_bytes())
        parse_cpu = min(parse_cpu, time.process_time() - t0)
    last: dict[str, tuple[program.Task, dict[str, Any], InputReads]] = {}
    rows: dict[str, list[float]] = {k: [0, 0.0] for k in ORDER}
    same_output = 0  # of the "only" row: the last output again, but for what it records
    ignored = ("sink_calls", "forced")
    run_task = program._run_task

    def timed(task: program.Task, raw: bytes | None = None) -> Any:
        nonlocal same_output
        start = time.process_time()
        output, reads = run_task(task, raw)
        spent = time.process_time() - start
        why = reason(last.get(task.path), task)
        if why == "sink calls or forcing changed only":
            old = last[task.path][1]
            same_output += all(
                old.get(k) == output.get(k) for k in old.keys() | output.keys() if k not in ignored
            )
        row = rows[why]
        row[0] += 1
        row[1] += spent
        last[task.path] = (task, output, reads)
        return output, reads

    program._run_task = timed
    try:
        t0 = time.process_time()
        _, driver = program.lint_program(names, config, 1, None)
        total = time.process_time() - t0
    finally:
        program._run_task = run_task
    return {
        "files": len(names),
        "parse_cpu": parse_cpu,
        "total_cpu": total,
        "analysed": driver.analysed,
        "waves": driver.rounds,
        "same_output": same_output,
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    here = Path.cwd()
    for tree in args.trees:
        os.chdir(here)
        m = measure(tree)
        analysis = sum(t for _, t in m["rows"].values())
        print(
            f"{tree.name}: {m['files']} files, {m['analysed']} analyses, {m['waves']} waves "
            f"(cap {program.MAX_WAVES}), run CPU "
            f"{m['total_cpu']:.2f} s, analyses {analysis:.2f} s, parse-only {m['parse_cpu']:.2f} s "
            f"({m['total_cpu'] / m['parse_cpu']:.1f}x; first analyses alone "
            f"{m['rows']['first'][1] / m['parse_cpu']:.1f}x)"
        )
        for key in ORDER:
            n, t = m["rows"][key]
            share = t / analysis if analysis else 0.0
            same = (
                f" ({m['same_output']} gave the last output again)" if key.endswith("only") else ""
            )
            print(f"  {key:56s} {int(n):5d} {t:7.2f} s {share:6.1%}{same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
