"""A time formatted to the minute in one branch of a conditional on a parameter and to the day
in the other (``now.strftime("%H:%M") if include_hour_min else now.strftime("%Y-%m-%d")``):
each call is reported at the precision of the branch its argument, or the default it leaves,
takes; a call whose argument is not a literal keeps the finer one. The same across modules
(the helper's summary read from its export)."""

from __future__ import annotations

from pathlib import Path

from branch_requests import ASK, time_findings, time_findings_across_modules

from promptcache.lint_rules import Severity, lint_source

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


def test_each_call_gets_the_precision_of_the_branch_it_takes() -> None:
    source = HELPER + CALLS
    offset = HELPER.count("\n")
    found = time_findings(lint_source(source, "app.py").diagnostics)
    assert found == [(line + offset, severity) for line, severity in WANT]


def test_the_branch_is_chosen_across_modules(tmp_path: Path) -> None:
    for found in time_findings_across_modules(tmp_path, HELPER, "day_time, rebound", CALLS):
        assert found == [(line + 1, severity) for line, severity in WANT]
