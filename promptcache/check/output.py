"""Report formats of ``promptcache check``: text, JSON, SARIF 2.1.0 and GitHub annotations.

Every format names the call site (the first stack frame in the user's code), the rule, the
perturbation that caused a difference and the request path. SARIF results are located at the
call site, relative to the current folder (``%SRCROOT%``) where they can be, like
``promptcache lint``'s SARIF; a finding without a call site at the file COMMAND runs.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from promptcache import __version__

from .capture import CallSite
from .findings import CAUSE_LABELS, RULE_TITLES, UNEXPLAINED, Finding
from .runner import CheckResult

__all__ = ["FORMATS", "cannot_write", "named_by_command", "render", "summary"]

FORMATS: Final = ("text", "json", "sarif", "github")
SCHEMA_URI: Final = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_ROOT_ID: Final = "%SRCROOT%"


def _where(site: CallSite | None) -> str:
    if site is None:
        return "(call site unknown)"
    return f"{_relative(site.path)}:{site.line} in {site.function}"


def _called_from(site: CallSite | None) -> str:
    """``called from app.py:6 in main, from app.py:20 in <module>``; "" without callers."""
    if site is None or not site.callers:
        return ""
    return "called from " + ", from ".join(
        f"{_relative(path)}:{line} in {function}" for path, line, function in site.callers
    )


def _relative(path: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path


def _causes(finding: Finding) -> str:
    return " or ".join(CAUSE_LABELS[c] for c in finding.causes)


def _headline(finding: Finding) -> str:
    if finding.check != "difference":
        return finding.message
    if finding.causes == (UNEXPLAINED,):
        return f"{finding.message}; {CAUSE_LABELS[UNEXPLAINED]}"
    return f"{finding.message}; caused by {_causes(finding)}"


def _in_runs(finding: Finding) -> str:
    """``, in runs 1 and 2`` when the requests came from more than one run, else nothing."""
    runs = [str(r) for r in finding.seen_in]
    if len(runs) < 2:
        return ""
    return f", in runs {', '.join(runs[:-1])} and {runs[-1]}"


def render_text(result: CheckResult) -> str:
    """Human-readable report: one block per finding, then the runs and a summary line."""
    lines: list[str] = []
    for f in result.findings:
        lines.append(f"{_where(f.site)}: {f.rule} {f.title} ({f.api}, {f.path})")
        lines.append(f"  {_headline(f)}")
        if _called_from(f.site):
            lines.append(f"  {_called_from(f.site)}")
        if f.before is not None or f.after is not None:
            lines.append(f"  {'run 0:':<8} {f.before!r}")
            lines.append(f"  {f'run {f.run}:':<8} {f.after!r}")
        if f.requests > 1:
            lines.append(f"  seen in {f.requests} requests from this call site{_in_runs(f)}")
        lines.append("")
    for run in result.runs:
        prompts = sum(1 for r in run.requests if r.api is not None)
        # requests to routes that carry no prompt compared (embeddings, count_tokens, GET
        # /v1/models): counted apart, so the line matches the JSON's requests and llm_requests
        others = len(run.requests) - prompts
        also = f" and {others} other request(s) (no prompt to compare)" if others else ""
        lines.append(
            f"{run.describe()}; {prompts} LLM request(s){also} captured in {run.duration_s:.2f} s"
        )
    for note in result.notes:
        lines.append(f"note: {note}")
    lines.append(summary(result))
    return "\n".join(lines) + "\n"


def summary(result: CheckResult) -> str:
    """The text report's last line: ``promptcache check: N finding(s) in M runs``."""
    count, runs = len(result.findings), len(result.runs)
    return f"promptcache check: {count} finding{'' if count == 1 else 's'} in {runs} runs"


def result_json(result: CheckResult) -> dict[str, Any]:
    """The ``--format json`` document as a dict."""
    return {
        "command": result.command,
        "runs": [
            {
                "run": r.perturbation.run,
                "changes": list(r.perturbation.changed),
                "description": r.describe(),
                "exit_status": r.exit_status,
                "duration_s": round(r.duration_s, 3),
                "requests": len(r.requests),
                "llm_requests": sum(1 for q in r.requests if q.api is not None),
            }
            for r in result.runs
        ],
        "findings": [
            {
                "rule": f.rule,
                "title": f.title,
                "check": f.check,
                "causes": list(f.causes),
                "site": None
                if f.site is None
                else {
                    "path": f.site.path,
                    "line": f.site.line,
                    "function": f.site.function,
                    "callers": [
                        {"path": p, "line": n, "function": fn} for p, n, fn in f.site.callers
                    ],
                },
                "api": f.api,
                "path": f.path,
                "message": f.message,
                "before": f.before,
                "after": f.after,
                "run": f.run,
                "requests": f.requests,
                "seen_in_runs": list(f.seen_in),
            }
            for f in result.findings
        ],
        "notes": result.notes,
    }


def _sarif_location(path: str, line: int, root: Path) -> dict[str, Any]:
    """A SARIF location: line ``line`` (1-based) of ``path``, relative to ``root`` when under it."""
    return {
        "physicalLocation": {
            "artifactLocation": _artifact(path, root),
            "region": {"startLine": line},
        }
    }


def _command_file(command: Sequence[str]) -> Path | None:
    """The file COMMAND runs: the first argument after the program that names an existing file
    (``smoke.py`` of ``python smoke.py``), else the program itself (a path, or found on
    ``PATH``)."""
    for arg in command[1:]:
        if not arg.startswith("-") and os.path.isfile(arg):
            return Path(os.path.abspath(arg))
    if command:
        program = command[0] if os.sep in command[0] else shutil.which(command[0])
        if program and os.path.isfile(program):
            return Path(os.path.abspath(program))
    return None


def named_by_command(output: str | Path, command: Sequence[str]) -> bool:
    """Whether the report file ``output`` is an existing file that an argument of COMMAND
    names (as a whole, or after ``=`` in ``--option=FILE``): ``-o smoke.py`` for
    ``-o smoke.sarif``, which would replace the program's source with the report."""
    if not os.path.isfile(output):
        return False
    for arg in command:
        for name in {arg, arg.partition("=")[2]} - {""}:
            try:
                if os.path.isfile(name) and os.path.samefile(name, output):
                    return True
            except OSError:
                continue
    return False


def cannot_write(output: str | Path) -> str | None:
    """Why the report file ``output`` cannot be written, found before the runs (which may
    take minutes, or cost money with ``--forward``) rather than after them; None when it can.

    The file is opened for appending, so an existing one is left as it is; one this probe
    creates is removed again (through a symbolic link, the file it points to)."""
    created = not os.path.exists(output)
    if not created and not os.path.isfile(output):
        return None  # a pipe or device (/dev/stdout): opening it is not a harmless probe
    try:
        with open(output, "ab"):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc)
        if os.path.islink(output) and exc.errno != errno.ELOOP:
            why += f" (a symbolic link to {os.readlink(output)!r})"
        return why
    if created:
        with contextlib.suppress(OSError):
            os.unlink(os.path.realpath(output))
    return None


def _artifact(path: str | Path, root: Path) -> dict[str, str]:
    absolute = Path(os.path.abspath(path))
    try:
        return {"uri": quote(absolute.relative_to(root).as_posix()), "uriBaseId": _ROOT_ID}
    except ValueError:
        return {"uri": absolute.as_uri()}


def render_sarif(result: CheckResult) -> str:
    """SARIF 2.1.0: one result per finding, located at its call site, its callers (the frames
    of the user's code that called it) named in the message and as related locations, so the
    findings of two callers of one helper differ. A finding without a call site is located at
    the file COMMAND runs (no region): GitHub code scanning refuses a whole upload in which one
    result has no location."""
    root = Path.cwd().resolve()
    used = sorted({f.rule for f in result.findings} | set(RULE_TITLES))
    results = []
    script = _command_file(result.command)
    for f in result.findings:
        text = f"{_headline(f)} ({f.api}, {f.path})"
        called_from = _called_from(f.site)
        if called_from:
            text += f"; {called_from}"
        entry: dict[str, Any] = {
            "ruleId": f.rule,
            "level": "error",
            "message": {"text": text},
            "properties": {"check": f.check, "causes": list(f.causes), "path": f.path},
        }
        if f.site is not None:
            entry["locations"] = [_sarif_location(f.site.path, f.site.line, root)]
            if f.site.callers:
                entry["relatedLocations"] = [
                    {
                        "id": number,
                        **_sarif_location(path, line, root),
                        "message": {"text": f"caller {number + 1}, in {function}"},
                    }
                    for number, (path, line, function) in enumerate(f.site.callers)
                ]
        elif script is not None:
            where = _relative(str(script))
            entry["message"]["text"] = (
                f"{text}; call site unknown, shown at {where}, which the command runs"
            )
            entry["locations"] = [
                {"physicalLocation": {"artifactLocation": _artifact(script, root)}}
            ]
        results.append(entry)
    doc = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "promptcache check",
                        "version": __version__,
                        "rules": [{"id": code, "name": RULE_TITLES[code]} for code in used],
                    }
                },
                "originalUriBaseIds": {_ROOT_ID: {"uri": root.as_uri() + "/"}},
                "results": results,
                # the notes (nothing compared, requests not captured) as the text report's
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "toolExecutionNotifications": [
                            {"level": "note", "message": {"text": note}} for note in result.notes
                        ],
                    }
                ],
            }
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(result: CheckResult) -> str:
    """GitHub Actions workflow commands: one ``::error`` annotation per finding, at its call
    site, then one ``::notice`` per note, as the text report's notes
    (https://docs.github.com/en/actions/reference/workflow-commands-for-github-actions ,
    checked 2026-12-03)."""
    lines = []
    for f in result.findings:
        props = [f"title={_escape_property(f'promptcache check {f.rule} {f.title}')}"]
        if f.site is not None:
            props.insert(0, f"file={_escape_property(_relative(f.site.path))},line={f.site.line}")
        text = f"{_headline(f)} ({f.api}, {f.path})"
        called_from = _called_from(f.site)
        if called_from:
            text += f"; {called_from}"
        if f.before is not None or f.after is not None:
            text += f"\nrun 0: {f.before!r}\nrun {f.run}: {f.after!r}"
        lines.append(f"::error {','.join(props)}::{_escape_data(text)}")
    for note in result.notes:
        title = _escape_property("promptcache check note")
        lines.append(f"::notice title={title}::{_escape_data(note)}")
    return "\n".join(lines) + ("\n" if lines else "")


def render(result: CheckResult, output_format: str) -> str:
    """``result`` in one of :data:`FORMATS`."""
    if output_format == "json":
        return json.dumps(result_json(result), indent=2, ensure_ascii=False) + "\n"
    if output_format == "sarif":
        return render_sarif(result)
    if output_format == "github":
        return render_github(result)
    return render_text(result)
