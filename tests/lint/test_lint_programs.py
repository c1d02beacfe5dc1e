"""Whole-program cases (tests/lint/programs/): each folder is linted as one program.

The flagged set of (file, line, column, code) must equal the inline markers of all its files,
with the cache off, with a cold cache, and again with the warm cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_markers import expected_markers

from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

PROGRAMS = Path(__file__).parent / "programs"
CASES = sorted(p for p in PROGRAMS.iterdir() if p.is_dir())


def _markers(folder: Path) -> set[tuple[str, int, int, str]]:
    found = set()
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).as_posix()
        for line, col, code in expected_markers(path.read_text(encoding="utf-8")):
            found.add((rel, line, col, code))
    return found


def _flagged(folder: Path, cache_dir: Path | None) -> set[tuple[str, int, int, str]]:
    config = parse_table({}, folder, KNOWN_CODES)
    results = lint_paths([folder], config, jobs=1, cache_dir=cache_dir)
    return {
        (Path(d.location.path).resolve().relative_to(folder.resolve()).as_posix(),
         d.location.line, d.location.col, d.code)
        for r in results
        for d in r.diagnostics
    }


@pytest.mark.parametrize("folder", CASES, ids=lambda p: p.name)
def test_program_flags_exactly_the_marked_lines(folder: Path, tmp_path: Path) -> None:
    want = _markers(folder)
    for cache_dir in (None, tmp_path / "cache", tmp_path / "cache"):  # off, cold, warm
        got = _flagged(folder, cache_dir)
        assert got == want, f"unexpected: {sorted(got - want)}\nmissing: {sorted(want - got)}"


def test_every_program_has_a_positive() -> None:
    assert all(_markers(folder) for folder in CASES)
