"""Shared helpers for the linter tests: fixture discovery and inline expected markers.

A fixture line that should be flagged ends with ``# PC001: 13`` (rule code, 0-based column as
``ast`` reports it; several may follow one ``#``). Unmarked lines must stay silent. A fixture
selects the rule named by its file name (``PC001_shapes.py`` -> PC001) unless a
``# OPTIONS: {...}`` line gives a JSON ``[tool.promptcache.lint]`` table.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

from promptcache.lint_rules import FileResult, lint_source
from promptcache.lint_rules.config import LintConfig, parse_table
from promptcache.lint_rules.registry import KNOWN_CODES

FIXTURES = Path(__file__).parent / "fixtures"
_MARK = re.compile(r"\b(PC\d{3}): (\d+)")


def expected_markers(source: str) -> set[tuple[int, int, str]]:
    """(line, column, code) for every marker in the fixture's comments."""
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            for code, col in _MARK.findall(token.string):
                found.add((token.start[0], int(col), code))
    return found


def program_markers(folder: Path) -> set[tuple[str, int, int, str]]:
    """(file relative to ``folder``, line, column, code) for every marker of a program."""
    found = set()
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).as_posix()
        for line, col, code in expected_markers(path.read_text(encoding="utf-8")):
            found.add((rel, line, col, code))
    return found


def fixture_config(path: Path, source: str) -> LintConfig:
    """The config a fixture asks for (its OPTIONS line, else only its own rule)."""
    for line in source.splitlines():
        if line.startswith("# OPTIONS:"):
            table = json.loads(line.removeprefix("# OPTIONS:"))
            return parse_table(table, path.parent, KNOWN_CODES)
    return parse_table({"select": [path.name[:5]]}, path.parent, KNOWN_CODES)


def lint_fixture(path: Path) -> tuple[str, FileResult]:
    """The fixture's source and what ``lint_source`` gives it under its own config."""
    source = path.read_text(encoding="utf-8")
    return source, lint_source(source, str(path), fixture_config(path, source))
