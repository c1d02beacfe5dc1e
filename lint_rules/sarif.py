"""SARIF 2.1.0 output: every rule in ``tool.driver.rules``, origins as ``relatedLocations``.

Checked against the OASIS SARIF 2.1.0 JSON schema in the test suite. Columns are 1-based
character columns. Every file URI is a relative, forward-slash path with ``uriBaseId``
"%SRCROOT%", which the run's ``originalUriBaseIds`` gives as the root folder's ``file:`` URI:
the root of the git repository the current folder is in (the nearest folder at or above it that
holds ``.git``), else the current folder. GitHub code scanning reads a relative URI as relative
to the root of the repository analysed ("Specifying the root for source files" in
https://docs.github.com/en/code-security/code-scanning/integrating-with-code-scanning/sarif-support-for-code-scanning
, checked 2026-12-05), so a run in a sub-folder of the repository (``cd backend && promptcache
lint . --format sarif``) still names ``backend/app.py``. A file outside the root gets its
absolute ``file:`` URI and no ``uriBaseId`` (SARIF 2.1.0 §3.4.4: an absolute URI has none;
§3.14.14 ``originalUriBaseIds``; https://docs.oasis-open.org/sarif/sarif/v2.1.0/, checked
2026-12-05). A fix's
``deletedRegion`` always has an end, also for an insertion (end == start): without one, §3.30.8
would mean "to the end of the line".
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from promptcache import __version__

from ._base import Location, Severity
from .output import Columns, repository_root
from .registry import RULES
from .runner import FileResult

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


ROOT_ID = "%SRCROOT%"


def _artifact(path: str, root: Path) -> dict[str, str]:
    """An ``artifactLocation``: relative to ``root`` (with ``uriBaseId``) where it can be;
    a relative ``path`` is relative to the current folder."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(root)
    except ValueError:
        return {"uri": absolute.as_uri()}
    # quoted as the name's bytes: a name that is not UTF-8 keeps them (%FF), as as_uri() does
    return {"uri": quote(os.fsencode(relative.as_posix())), "uriBaseId": ROOT_ID}


def _region(
    result: FileResult, loc: Location, columns: Columns, exact: bool = False
) -> dict[str, int]:
    """``exact``: always give the end (a fix's region; an insertion ends where it starts)."""
    region = {"startLine": loc.line, "startColumn": columns(result, loc)}
    if exact or (loc.end_line and (loc.end_line, loc.end_col) != (loc.line, loc.col)):
        region["endLine"] = loc.end_line
        region["endColumn"] = columns(result, loc, end=True)
    return region


def _physical(result: FileResult, loc: Location, root: Path, columns: Columns) -> dict[str, object]:
    return {"artifactLocation": _artifact(loc.path, root), "region": _region(result, loc, columns)}


def rule_descriptors() -> list[dict[str, Any]]:
    """``reportingDescriptor`` objects for every rule, in code order."""
    descriptors = []
    for rule in RULES.values():
        why = rule.sections.get("Why is this bad?", "")
        markdown = "\n\n".join(f"## {title}\n{text}" for title, text in rule.sections.items())
        descriptors.append(
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "fullDescription": {"text": rule.sections.get("What it does", rule.summary)},
                "help": {"text": why or rule.summary, "markdown": markdown},
                "defaultConfiguration": {"level": _LEVELS[rule.severity]},
                "properties": {"fix": rule.fix.value, "tags": ["prompt-caching"]},
            }
        )
    return descriptors


def render_sarif(results: Sequence[FileResult], root: Path | None = None) -> str:
    """One SARIF 2.1.0 log with a single run; URIs relative to ``root`` (default: the root of
    the git repository the current folder is in, else the current folder; the paths in
    ``results`` are relative to the current folder)."""
    root = Path(os.path.abspath(root if root is not None else repository_root(Path.cwd())))
    index = {code: i for i, code in enumerate(RULES)}
    columns = Columns()
    sarif_results = []
    for result in results:
        for d in result.diagnostics:
            item: dict[str, object] = {
                "ruleId": d.code,
                "ruleIndex": index.get(d.code, 0),
                "level": _LEVELS[d.severity],
                "message": {"text": d.message},
                "locations": [{"physicalLocation": _physical(result, d.location, root, columns)}],
            }
            if d.related:
                item["relatedLocations"] = [
                    {
                        "id": number,
                        "physicalLocation": _physical(result, r.location, root, columns),
                        "message": {"text": r.message},
                    }
                    for number, r in enumerate(d.related)
                ]
            if d.fix is not None:
                item["fixes"] = [
                    {
                        "description": {"text": d.fix.title},
                        "artifactChanges": [
                            {
                                "artifactLocation": _artifact(d.location.path, root),
                                "replacements": [
                                    {
                                        "deletedRegion": _region(
                                            result,
                                            Location(
                                                d.location.path,
                                                e.line,
                                                e.col,
                                                e.end_line,
                                                e.end_col,
                                            ),
                                            columns,
                                            exact=True,
                                        ),
                                        "insertedContent": {"text": e.text},
                                    }
                                    for e in d.fix.edits
                                ],
                            }
                        ],
                    }
                ]
            sarif_results.append(item)
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "promptcache-lint",
                        "semanticVersion": __version__,
                        "version": __version__,
                        "rules": rule_descriptors(),
                    }
                },
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {ROOT_ID: {"uri": root.as_uri().rstrip("/") + "/"}},
                "results": sarif_results,
            }
        ],
    }
    return json.dumps(log, indent=2, sort_keys=True) + "\n"
