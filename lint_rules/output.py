"""Render lint results as text (ruff-like), JSON or GitHub workflow annotations.

Columns in every output are 1-based character columns (diagnostics store 0-based UTF-8 byte
columns, as ``ast`` reports them; the runner keeps each flagged line's text to convert).
GitHub annotations name each file from the root of the git repository the current folder is in
(``repository_root``), as GitHub places ``file=`` from the repository's root: a run in
``backend/`` says ``file=backend/app.py``. Text and JSON name files from the current folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from importlib.util import decode_source
from pathlib import Path

from promptcache.formatting import plural

from ._base import Diagnostic, Location, Severity
from .files import _git_root
from .parse import source_lines
from .registry import RULES
from .runner import FileResult


def char_column(line_text: str | None, byte_col: int) -> int:
    """1-based character column of a 0-based UTF-8 byte offset within ``line_text``."""
    if not line_text:
        return byte_col + 1
    prefix = line_text.encode("utf-8")[:byte_col]
    return len(prefix.decode("utf-8", errors="ignore")) + 1


def _col(result: FileResult, location: Location, end: bool = False) -> int:
    line = location.end_line if end else location.line
    return char_column(result.lines.get(line), location.end_col if end else location.col)


class Columns:
    """1-based character columns of the places a report names, each in its own file: a place
    in the finding's file from the lines its ``FileResult`` keeps, a step of its chain in
    another module from that file, read once per report (a file that cannot be read or
    decoded gives the byte column + 1, as ``char_column`` of an unknown line)."""

    def __init__(self) -> None:
        self._files: dict[str, list[str] | None] = {}

    def _line(self, path: str, number: int) -> str | None:
        if path not in self._files:
            try:
                self._files[path] = source_lines(decode_source(Path(path).read_bytes()))
            except (OSError, UnicodeDecodeError, SyntaxError):
                self._files[path] = None
        lines = self._files[path]
        return lines[number - 1] if lines is not None and 0 < number <= len(lines) else None

    def __call__(self, result: FileResult, location: Location, end: bool = False) -> int:
        number = location.end_line if end else location.line
        col = location.end_col if end else location.col
        if location.path == result.path:
            return char_column(result.lines.get(number), col)
        return char_column(self._line(location.path, number), col)


def _all(results: Sequence[FileResult]) -> list[tuple[FileResult, Diagnostic]]:
    return [(r, d) for r in results for d in r.diagnostics]


def render_text(results: Sequence[FileResult], show_fixes: bool = True) -> str:
    """``path:line:col: PC001 error: message [origin: path:line]`` per finding (its severity
    after the code: ``error``, ``warning`` or ``info``), then a summary line:
    the findings, the files that hold them, the files checked, and the count per severity."""
    out = []
    pairs = _all(results)
    for result, d in pairs:
        out.append(_text_line(result, d, show_fixes))
    counts = {s: sum(1 for _, d in pairs if d.severity is s) for s in Severity}
    fixable_count = sum(1 for _, d in pairs if d.fix is not None)
    files = sum(1 for r in results if not r.skipped)
    if pairs:
        flagged = len({id(r) for r, _ in pairs})
        summary = (
            f"Found {plural(len(pairs), 'finding')} in {plural(flagged, 'file')} of {files} "
            f"checked ({plural(counts[Severity.ERROR], 'error')}, "
            f"{plural(counts[Severity.WARNING], 'warning')}, {counts[Severity.INFO]} info)."
        )
        if fixable_count and show_fixes:
            summary += f" {fixable_count} fixable with --fix."
    else:
        summary = f"All checks passed ({files} file{'s' if files != 1 else ''})."
    out.append(summary)
    return "\n".join(out) + "\n"


def _text_line(
    result: FileResult, d: Diagnostic, show_fixes: bool = True, severity: bool = True
) -> str:
    """One finding: ``path:line:col: CODE severity: message [origin: path:line, <step> at
    path:line]``; an unproven flow (``severity=False``, it is no finding) leaves the severity
    out."""
    origins = [r for r in d.related if r.origin]
    suffix = ""
    if origins:
        first = origins[0].location
        steps = "".join(
            f", {r.message.split('passes it on: ', 1)[-1]} at {r.location.path}:{r.location.line}"
            for r in d.related
            if not r.origin and r.value and "passes it on: " in r.message
        )
        suffix = f" [origin: {first.path}:{first.line}{steps}]"
    fixable = " [*]" if d.fix is not None and show_fixes else ""
    return (
        f"{d.location.path}:{d.location.line}:{_col(result, d.location)}: "
        f"{d.code}{fixable} {f'{d.severity.name.lower()}: ' if severity else ''}"
        f"{d.message}{suffix}"
    )


def render_notes(results: Sequence[FileResult]) -> str:
    """``--explain``: the unproven flows of the run (``FileResult.notes``), one line each after
    a heading; "" when there are none."""
    notes = [(r, d) for r in results for d in r.notes]
    if not notes:
        return ""
    count = len(notes)
    out = [
        f"explain: {count} unproven flow{'s' if count != 1 else ''} (not findings: the chain "
        "passes through a call the analysis cannot see, or a place it names does not show that "
        "step, or what it carries is not shown to change):"
    ]
    out.extend(f"  {_text_line(r, d, show_fixes=False, severity=False)}" for r, d in notes)
    return "\n".join(out) + "\n"


def _loc_json(result: FileResult, location: Location) -> dict[str, object]:
    return {
        "row": location.line,
        "column": _col(result, location),
        "end_row": location.end_line or location.line,
        "end_column": _col(result, location, end=True)
        if location.end_line
        else _col(result, location),
    }


def render_json(results: Sequence[FileResult]) -> str:
    """A JSON array, one object per finding (stable keys, 1-based rows and columns)."""
    items = []
    columns = Columns()
    for result, d in _all(results):
        rule = RULES.get(d.code)
        items.append(
            {
                "code": d.code,
                "name": rule.name if rule else "",
                "severity": str(d.severity),
                "message": d.message,
                "filename": d.location.path,
                "location": _loc_json(result, d.location),
                "related": [
                    {
                        "filename": r.location.path,
                        "row": r.location.line,
                        "column": columns(result, r.location),
                        "message": r.message,
                        "value": r.value,
                    }
                    for r in d.related
                ],
                "fix": None
                if d.fix is None
                else {
                    "title": d.fix.title,
                    "edits": [
                        {
                            "row": e.line,
                            "column": char_column(result.lines.get(e.line), e.col),
                            "end_row": e.end_line,
                            "end_column": char_column(result.lines.get(e.end_line), e.end_col),
                            "content": e.text,
                        }
                        for e in d.fix.edits
                    ],
                },
            }
        )
    return json.dumps(items, indent=2, sort_keys=True) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def repository_root(folder: Path) -> Path:
    """The root of the git repository ``folder`` is in (the nearest folder at or above it that
    holds ``.git``, a folder or, in a worktree or submodule, a file), else ``folder``."""
    folder = Path(os.path.abspath(folder))
    return _git_root(folder) or folder


def _from_root(path: str, root: Path) -> str:
    """``path`` (relative to the current folder) relative to ``root`` where it is under it."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(root).as_posix()
    except ValueError:
        return str(absolute)


def render_github(results: Sequence[FileResult], root: Path | None = None) -> str:
    """GitHub Actions workflow commands (``::error file=...::message``), one per finding; files
    relative to ``root`` (default: ``repository_root`` of the current folder)."""
    root = Path(os.path.abspath(root if root is not None else repository_root(Path.cwd())))
    out = []
    for result, d in _all(results):
        rule = RULES.get(d.code)
        title = f"{d.code} {rule.name}" if rule else d.code
        loc = d.location
        where = _escape_property(_from_root(loc.path, root))
        props = (
            f"file={where},line={loc.line},col={_col(result, loc)},"
            f"endLine={loc.end_line or loc.line},title={_escape_property(title)}"
        )
        out.append(f"::{_LEVELS[d.severity]} {props}::{_escape_data(d.message)}")
    return "\n".join(out) + ("\n" if out else "")
