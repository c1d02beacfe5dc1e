"""Every rule's fixtures: the flagged set of (line, column, code) equals the inline markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_markers import FIXTURES, expected_markers, fixture_config

from promptcache.lint_rules import lint_source
from promptcache.lint_rules.registry import RULES

CASES = sorted(p for p in FIXTURES.glob("PC*.py") if not p.name.endswith(".fixed.py"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_fixture_flags_exactly_the_marked_lines(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    result = lint_source(source, str(path), fixture_config(path, source))
    got = {(d.location.line, d.location.col, d.code) for d in result.diagnostics}
    want = expected_markers(source)
    assert got == want, (
        f"unexpected: {sorted(got - want)}\nmissing: {sorted(want - got)}\n"
        + "\n".join(
            f"{d.location.line}:{d.location.col} {d.code} {d.message}" for d in result.diagnostics
        )
    )


def test_every_rule_has_a_flagged_fixture_line() -> None:
    covered: dict[str, int] = {}
    for path in CASES:
        source = path.read_text(encoding="utf-8")
        for _, _, code in expected_markers(source):
            covered[code] = covered.get(code, 0) + 1
    missing = sorted(set(RULES) - set(covered) - {"PC000"})
    assert not missing, f"rules without a flagged fixture line: {missing}"
