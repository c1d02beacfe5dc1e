"""A method summary a class inherits from a base class of another module is qualified for its
own module once per run (``Program._inherited``), however often the driver resolves classes
that inherit it: a fresh copy for each resolution took most of the driver's planning time on
projects with deep adapter hierarchies (aider: a third of a cold run)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptcache.lint_rules.analysis import program as driver
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.files import discover
from promptcache.lint_rules.registry import KNOWN_CODES

PROGRAM = Path(__file__).resolve().parent / "programs" / "z_inherited_adapter"


def test_each_inherited_summary_is_qualified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    qualify = driver._qualified_classes
    calls: Counter[tuple[int, str]] = Counter()
    kept: list[Any] = []
    depth = [0]

    def counted(summary: Any, module: str) -> Any:
        if depth[0] == 0:  # a summary, not one of its parts (the function recurses)
            kept.append(summary)  # ids stay unique while the summaries are alive
            calls[id(summary), module] += 1
        depth[0] += 1
        try:
            return qualify(summary, module)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(driver, "_qualified_classes", counted)
    config = parse_table({}, PROGRAM, KNOWN_CODES)
    files = [str(p) for p in discover([PROGRAM], config, False)]
    results = driver.Program(files, config, 1).run()
    assert calls, "the program inherits methods across modules"
    assert max(calls.values()) == 1, calls
    # and the findings are those the program's expectations name
    assert any(d.code == "PC005" for r in results for d in r.diagnostics)
