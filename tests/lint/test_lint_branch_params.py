"""A time formatted to the minute in one branch of a conditional on a parameter and to the day
in the other (``now.strftime("%H:%M") if include_hour_min else now.strftime("%Y-%m-%d")``):
each call is reported at the precision of the branch its argument, or the default it leaves,
takes; a call whose argument is not a literal keeps the finer one. The same across modules
(the helper's summary read from its export)."""

from __future__ import annotations

from pathlib import Path

from branch_requests import ASK

from promptcache.lint_rules import Severity, lint_source
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

HELPER = """
from datetime import datetime


def day_time(include_day_of_week: bool = True, include_hour_min: bool = False) -> str:
    now = datetime.now()
    formatted = now.strftime("%B %d, %Y %H:%M") if include_hour_min else now.strftime("%B %d, %Y")
    if include_day_of_week:
        return f"{now.strftime('%A')} {formatted}"
    return formatted


def rebound(include_hour_min: bool = False) -> str:
    include_hour_min = include_hour_min or len(__name__) > 3
    now = datetime.now()
    return now.strftime("%H:%M") if include_hour_min else now.strftime("%Y-%m-%d")
"""

CALLS = (
    ASK
    + """

def by_default(question: str):
    return ask(question, day_time())


def by_minute(question: str):
    return ask(question, day_time(include_hour_min=True))


def by_day_given(question: str):
    return ask(question, day_time(False, False))


def by_minute_positional(question: str):
    return ask(question, day_time(True, True))


def by_setting(question: str, precise: bool):
    return ask(question, day_time(include_hour_min=precise))


def by_rebound(question: str):
    return ask(question, rebound())
"""
)

#: the line of each caller's ``return`` in CALLS, and the severity its PC001 must have
WANT = [
    (19, Severity.INFO),  # the default leaves the day branch
    (23, Severity.ERROR),  # include_hour_min=True
    (27, Severity.INFO),  # False given
    (31, Severity.ERROR),  # True given by position
    (35, Severity.ERROR),  # not known: the finer branch stays
    (39, Severity.ERROR),  # the parameter is reassigned: no branch is chosen by the caller
]


def _time_findings(diagnostics: object) -> list[tuple[int, Severity]]:
    return sorted(
        (d.location.line, d.severity)
        for d in diagnostics  # type: ignore[attr-defined]
        if d.code == "PC001"
    )


def test_each_call_gets_the_precision_of_the_branch_it_takes() -> None:
    source = HELPER + CALLS
    offset = HELPER.count("\n")
    found = _time_findings(lint_source(source, "app.py").diagnostics)
    assert found == [(line + offset, severity) for line, severity in WANT]


def test_the_branch_is_chosen_across_modules(tmp_path: Path) -> None:
    (tmp_path / "prompt_utils.py").write_text(HELPER, encoding="utf-8")
    (tmp_path / "app.py").write_text(
        "from prompt_utils import day_time, rebound\n" + CALLS, encoding="utf-8"
    )
    config = parse_table({}, tmp_path, KNOWN_CODES)
    for cache_dir in (None, tmp_path / "cache", tmp_path / "cache"):  # off, cold, warm
        results = lint_paths([tmp_path], config, jobs=1, cache_dir=cache_dir)
        found = _time_findings(d for r in results for d in r.diagnostics)
        assert found == [(line + 1, severity) for line, severity in WANT]
