"""Check that a change to the linter's driver leaves its findings exactly as they were.

A speed change (pruning, caching, scheduling) must not change what ``promptcache lint``
reports. ``dump`` lints folders with whichever linter ``promptcache.lint_rules`` imports (set
``PYTHONPATH`` to an export of another commit to dump that one) and writes every finding and
every unproven flow (``--explain``'s notes), at every severity, as JSON: rule, file, line,
column, message and the whole chain (each step's ``file:line``, message and value).
``compare`` prints the findings one dump has and the other lacks, and exits 1 if there are any;
``--sort-chains`` compares each finding's steps as a set (the steps of findings merged from
duplicates at one place come in the order the rules produced them, which can differ between
two runs of the same linter).

Usage::

    PYTHONPATH=<export of the old commit> .venv/bin/python benchmarks/lint_same_findings.py \\
        dump ../corpus-trees/aider ../corpus-trees/khoj tests/lint --out /tmp/old.json
    .venv/bin/python benchmarks/lint_same_findings.py dump ../corpus-trees/aider \\
        ../corpus-trees/khoj tests/lint --out /tmp/new.json
    .venv/bin/python benchmarks/lint_same_findings.py compare /tmp/old.json /tmp/new.json

Each folder is linted as its own program, without a cache, with ``--jobs`` workers (default
1); test files are left out as ``promptcache lint`` does, unless ``--include-tests``. Paths are
written relative to the folder linted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from promptcache.lint_rules import LintConfig, lint_paths
from promptcache.lint_rules.analysis.cache import diagnostic_to_json


def _finding(kind: str, root: Path, diagnostic: Any) -> dict[str, Any]:
    data = diagnostic_to_json(diagnostic)

    def rel(loc: list[Any]) -> list[Any]:
        path = Path(loc[0])
        with contextlib.suppress(ValueError):  # another drive (Windows): kept as it is
            loc = [Path(os.path.relpath(path.resolve(), root.resolve())).as_posix(), *loc[1:]]
        return loc

    data["location"] = rel(data["location"])
    data["related"] = [[rel(r[0]), *r[1:]] for r in data["related"]]
    data["kind"] = kind
    return data


def dump_folder(folder: Path, jobs: int, include_tests: bool) -> tuple[list[dict[str, Any]], float]:
    """Every finding and note of one cold lint of ``folder``, sorted; and its wall seconds."""
    config = LintConfig(root=folder, respect_gitignore=False)
    t0 = time.perf_counter()
    results = lint_paths([folder], config, jobs=jobs, cache_dir=None, include_tests=include_tests)
    wall = time.perf_counter() - t0
    out = []
    for result in results:
        out += [_finding("finding", folder, d) for d in result.diagnostics]
        out += [_finding("note", folder, d) for d in result.notes]
    out.sort(key=lambda d: json.dumps(d, sort_keys=True))
    return out, wall


def _key(finding: dict[str, Any], sort_chains: bool) -> str:
    if sort_chains:
        finding = {**finding, "related": sorted(finding["related"], key=json.dumps)}
    return json.dumps(finding, sort_keys=True)


def compare(old: dict[str, Any], new: dict[str, Any], sort_chains: bool = False) -> int:
    """Print what differs between two dumps; the number of differing findings."""
    differences = 0
    for folder in sorted(set(old) | set(new)):
        if folder not in old or folder not in new:
            print(f"{folder}: only in {'the new' if folder in new else 'the old'} dump")
            differences += 1
            continue
        a = {_key(d, sort_chains) for d in old[folder]}
        b = {_key(d, sort_chains) for d in new[folder]}
        for line in sorted(a - b):
            print(f"{folder}: only old: {line}")
        for line in sorted(b - a):
            print(f"{folder}: only new: {line}")
        differences += len(a ^ b)
        print(f"{folder}: {len(old[folder])} old, {len(new[folder])} new, {len(a ^ b)} differ")
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dump = sub.add_parser("dump", help="lint folders and write their findings as JSON")
    dump.add_argument("folders", nargs="+", type=Path)
    dump.add_argument("--out", type=Path, required=True)
    dump.add_argument("--jobs", type=int, default=1)
    dump.add_argument("--include-tests", action="store_true")
    cmp = sub.add_parser("compare", help="compare two dumps; exit 1 if they differ")
    cmp.add_argument("old", type=Path)
    cmp.add_argument("new", type=Path)
    cmp.add_argument("--sort-chains", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "compare":
        old = json.loads(args.old.read_text())
        new = json.loads(args.new.read_text())
        return 1 if compare(old, new, args.sort_chains) else 0
    data: dict[str, Any] = {}
    for folder in args.folders:
        if not folder.is_dir():
            parser.error(f"not a folder: {folder}")
        findings, wall = dump_folder(folder, args.jobs, args.include_tests)
        data[folder.name] = findings
        print(f"{folder.name}: {len(findings)} findings and notes, {wall:.1f} s", flush=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
