"""The demo's ``promptcache check`` step: run each app perturbed against check's own endpoint.

Both apps run their ``__main__`` (a three-turn story) under ``promptcache check --format json``,
the two checks at once, each against check's capture endpoint (canned answers: no engine, no
model), so the step costs a few seconds: the apps' start-up, twice each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from promptcache.errors import DemoError

__all__ = ["CheckFinding", "check_apps"]

_CLI = "from promptcache.cli import main; main()"


@dataclass(frozen=True)
class CheckFinding:
    """One ``promptcache check`` finding of an app: where, which rule, what caused it."""

    path: str
    line: int
    function: str
    code: str
    title: str
    causes: tuple[str, ...]
    field: str


def check_apps(paths: dict[str, Path], output_dir: Path) -> dict[str, list[CheckFinding]]:
    """Run ``promptcache check`` on each app (at once); findings per variant name. Writes
    ``check-NAME.json`` (the report) and ``check-NAME.txt`` (the apps' output) to
    ``output_dir``.

    Raises:
        DemoError: a check failed (exit status 2: the app itself failed) or wrote no report.
    """
    procs = {}
    for name, path in paths.items():
        # absolute: check runs in the repository (its findings name examples/...), while a
        # relative output_dir (the default out/demo) is the user's working directory's
        report = (output_dir / f"check-{name}.json").resolve()
        log = (output_dir / f"check-{name}.txt").open("w", encoding="utf-8")
        args = [sys.executable, "-c", _CLI, "check", "--format", "json", "--output", str(report)]
        procs[name] = (
            subprocess.Popen(
                [*args, "--", sys.executable, str(path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=path.parent.parent,
            ),
            log,
            report,
        )
    found: dict[str, list[CheckFinding]] = {}
    for name, (proc, log, report) in procs.items():
        status = proc.wait()
        log.close()
        if status not in (0, 1) or not report.is_file():
            shown = log.name
            raise DemoError(f"`promptcache check` on the {name} app failed ({status}): see {shown}")
        doc = json.loads(report.read_text(encoding="utf-8"))
        found[name] = [
            CheckFinding(
                path=Path(item["site"]["path"]).name if item["site"] else "?",
                line=int(item["site"]["line"]) if item["site"] else 0,
                function=item["site"]["function"] if item["site"] else "?",
                code=item["rule"],
                title=item["title"],
                causes=tuple(item["causes"]),
                field=item["path"],
            )
            for item in doc["findings"]
        ]
    return found
