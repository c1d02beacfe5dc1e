"""Helpers for the check tests: run `promptcache check` on the programs in programs/ or on a
program's source."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from promptcache.check.findings import Finding
from promptcache.check.runner import CheckResult, run_check

PROGRAMS = Path(__file__).parent / "programs"
REPO = Path(__file__).resolve().parents[2]
CLI = "from promptcache.cli import main; main()"


def check_program(tmp: Path, *args: str, **options: object) -> tuple[CheckResult, str]:
    """``run_check`` on ``python programs/ARGS...``; returns the result and the program's
    stdout (all runs)."""
    out = tmp / "program-stdout.txt"
    with out.open("w", encoding="utf-8") as handle:
        result = run_check(
            [sys.executable, str(PROGRAMS / args[0]), *args[1:]], stdout=handle, **options
        )  # type: ignore[arg-type]
    return result, out.read_text(encoding="utf-8")


def check_source(tmp: Path, name: str, source: str, *args: str, **options: object) -> CheckResult:
    """``run_check`` on ``python TMP/NAME ARGS...``, the file NAME written with ``source``; the
    program's stdout (all runs) goes to TMP/out.txt."""
    program = tmp / name
    program.write_text(source, encoding="utf-8")
    with (tmp / "out.txt").open("w", encoding="utf-8") as out:
        return run_check([sys.executable, str(program), *args], stdout=out, **options)  # type: ignore[arg-type]


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """``promptcache ARGS`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def by_function(result: CheckResult) -> dict[str, list[Finding]]:
    """Findings keyed by their call site's function name."""
    out: dict[str, list[Finding]] = {}
    for finding in result.findings:
        assert finding.site is not None, finding
        out.setdefault(finding.site.function, []).append(finding)
    return out
