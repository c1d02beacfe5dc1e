"""A time formatted by a format that is one of a few constants (``fmt = "%H:%M" if
include_hour_min else "%Y-%m-%d"``, or an ``if`` that rebinds ``fmt``), then
``now.strftime(fmt)``, ``time.strftime(fmt)`` or ``f"{now:{fmt}}"``: a call that fixes the
helper's parameter is reported at the precision of the format it picks, or of the default it
leaves; where either format may be used, at the finer one: an error when one of them shows
the time of day (as a time to the minute alone is), the daily info when the finer is a date,
nothing when both are a month or coarser. The same across modules (the helper's summary read
from its export)."""

from __future__ import annotations

from pathlib import Path

from branch_requests import ASK, time_findings, time_findings_across_modules

from promptcache.lint_rules import Severity, lint_source

HELPER = """
import time
from datetime import datetime


def stamp(include_hour_min: bool = False) -> str:
    fmt = "%H:%M" if include_hour_min else "%Y-%m-%d"
    return datetime.now().strftime(fmt)


def clock(include_hour_min: bool = False) -> str:
    return time.strftime("%H:%M" if include_hour_min else "%A %d %B")


def rebound(verbose: bool) -> str:
    fmt = "%B %Y"
    if verbose:
        fmt = "%A %d %B %Y"
    return f"{datetime.now():{fmt}}"


def coarse(verbose: bool) -> str:
    fmt = "%B %Y" if verbose else "%Y"
    return datetime.now().strftime(fmt)
"""

CALLS = (
    ASK
    + """

def by_default(question: str):
    return ask(question, stamp())


def by_minute(question: str):
    return ask(question, stamp(include_hour_min=True))


def by_day_given(question: str):
    return ask(question, stamp(False))


def by_setting(question: str, precise: bool):
    return ask(question, stamp(precise))


def clock_by_default(question: str):
    return ask(question, clock())


def clock_by_minute(question: str):
    return ask(question, clock(True))


def by_either_day(question: str, verbose: bool):
    return ask(question, rebound(verbose))


def by_month_or_year(question: str, verbose: bool):
    return ask(question, coarse(verbose))
"""
)

#: the line of each caller's ``return`` in CALLS, and the severity its PC001 must have
WANT = [
    (19, Severity.INFO),  # the default leaves the date format
    (23, Severity.ERROR),  # include_hour_min=True: to the minute
    (27, Severity.INFO),  # False given
    (31, Severity.ERROR),  # not known: the finer format stays
    (35, Severity.INFO),  # time.strftime, the default's day
    (39, Severity.ERROR),  # time.strftime, True given
    (43, Severity.INFO),  # a month or a day: the day
]

LOCAL = """
from datetime import datetime

import openai

client = openai.OpenAI()
RULES = "Answer briefly and cite the manual. " * 80


def ask(question: str, fmt: str, system: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )


def either(question: str, precise: bool):
    fmt = "%H:%M" if precise else "%d"
    return ask(question, fmt, f"Now: {datetime.now().strftime(fmt)}.\\n{RULES}")


def day_or_year(question: str, precise: bool):
    fmt = "%d" if precise else "%Y"
    return ask(question, fmt, f"Now: {datetime.now().strftime(fmt)}.\\n{RULES}")


def month_or_year(question: str, precise: bool):
    fmt = "%B" if precise else "%Y"
    return ask(question, fmt, f"Now: {datetime.now().strftime(fmt)}.\\n{RULES}")


def constant_spec(question: str):
    fmt = "%Y-%m-%d"
    return ask(question, fmt, f"Now: {datetime.now():{fmt}}.\\n{RULES}")


def any_format(question: str, fmt: str):
    return ask(question, fmt, f"Now: {datetime.now().strftime(fmt)}.\\n{RULES}")
"""


def test_each_call_gets_the_precision_of_the_format_it_picks() -> None:
    source = HELPER + CALLS
    offset = HELPER.count("\n")
    found = time_findings(lint_source(source, "app.py").diagnostics)
    assert found == [(line + offset, severity) for line, severity in WANT]


def test_the_format_is_picked_across_modules(tmp_path: Path) -> None:
    names = "clock, coarse, rebound, stamp"
    for found in time_findings_across_modules(tmp_path, HELPER, names, CALLS):
        assert found == [(line + 1, severity) for line, severity in WANT]


def test_a_format_chosen_where_the_request_is_sent_takes_the_finer() -> None:
    """Minute or day: the error a time to the minute alone gets; day or year: the daily
    info; month or year: nothing; a constant format named in the f-string's spec: its own
    precision; a format of unknown text: the time as it is (an error)."""
    found = time_findings(lint_source(LOCAL, "app.py").diagnostics)
    assert found == [
        (19, Severity.ERROR),
        (24, Severity.INFO),
        (34, Severity.INFO),
        (38, Severity.ERROR),
    ]
