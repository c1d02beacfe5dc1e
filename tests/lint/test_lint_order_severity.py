"""Severity follows how often the text changes. PC004: a set of strings (per process) and tasks
in the order they finish (per run) are errors; a directory listing, stable on one machine while
the folder is unchanged, is info, the cost of a day-precision date."""

from __future__ import annotations

import pytest

from promptcache.lint_rules import Severity, lint_source

TEMPLATE = """
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import anthropic

client = anthropic.Anthropic()


def names() -> list[str]:
    return {source}


def ask(question: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=500,
        system="Skills:\\n" + "\\n".join(names()),
        messages=[{{"role": "user", "content": question}}],
    )
"""

CASES = {
    "[name for name in os.listdir('skills')]": Severity.INFO,
    "[p.name for p in Path('skills').iterdir()]": Severity.INFO,
    "[p.stem for p in Path('skills').rglob('*.md')]": Severity.INFO,
    "[name for name in {'billing', 'refunds', 'shipping'}]": Severity.ERROR,
    "[f.result() for f in as_completed([ThreadPoolExecutor().submit(str, n) for n in 'ab'])]": (
        Severity.ERROR
    ),
}


@pytest.mark.parametrize("source", sorted(CASES))
def test_pc004_severity_follows_how_often_the_order_changes(source: str) -> None:
    found = [
        d
        for d in lint_source(TEMPLATE.format(source=source), "app.py").diagnostics
        if d.code == "PC004"
    ]
    assert [(d.location.line, d.severity) for d in found] == [(19, CASES[source])]


@pytest.mark.parametrize("source", sorted(CASES))
def test_sorted_order_is_no_finding_at_any_severity(source: str) -> None:
    fixed = TEMPLATE.format(source=f"sorted({source})")
    assert [d for d in lint_source(fixed, "app.py").diagnostics if d.code == "PC004"] == []

