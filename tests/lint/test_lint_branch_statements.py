"""A time formatted to the minute in one branch of an ``if`` statement on a parameter and to
the day in the other (``if include_hour_min:`` / ``if not include_hour_min:``, the branches
assigning the text or returning it, or one branch returning before the other's code): each
call is reported at the precision of the branch its argument, or the default it leaves,
takes; a call whose argument is not a literal, or a helper that reassigns the parameter,
keeps the finer one. A time both branches hold is reported whatever the argument. The same
across modules (the helper's summary read from its export)."""

from __future__ import annotations

from pathlib import Path

from branch_requests import ASK, time_findings, time_findings_across_modules

from promptcache.lint_rules import Severity, lint_source

HELPER = """
from datetime import datetime


def assigned(include_hour_min: bool = False) -> str:
    now = datetime.now()
    if include_hour_min:
        formatted = now.strftime("%B %d, %Y %H:%M")
    else:
        formatted = now.strftime("%B %d, %Y")
    return f"Today is {formatted}."


def returned(include_hour_min: bool = False) -> str:
    now = datetime.now()
    if include_hour_min:
        return now.strftime("%B %d, %Y %H:%M")
    else:
        return now.strftime("%B %d, %Y")


def returned_early(include_hour_min: bool = False) -> str:
    now = datetime.now()
    if not include_hour_min:
        return now.strftime("%B %d, %Y")
    return now.strftime("%B %d, %Y %H:%M")


def overwritten(include_hour_min: bool = False) -> str:
    now = datetime.now()
    text = now.strftime("%B %d, %Y")
    if include_hour_min:
        text = now.strftime("%B %d, %Y %H:%M")
    return text


def both_branches(verbose: bool = False) -> str:
    stamp = datetime.now().isoformat()
    if verbose:
        return f"It is {stamp} (server time)."
    return stamp


def rebound(include_hour_min: bool = False) -> str:
    include_hour_min = include_hour_min or len(__name__) > 3
    now = datetime.now()
    if include_hour_min:
        return now.strftime("%H:%M")
    return now.strftime("%Y-%m-%d")
"""

#: (the helper's call, the severity its caller's PC001 must have)
CASES = [
    (f"{helper}({args})", severity)
    for helper in ("assigned", "returned", "returned_early", "overwritten")
    for args, severity in (
        ("", Severity.INFO),  # the default leaves the day branch
        ("include_hour_min=False", Severity.INFO),
        ("False", Severity.INFO),
        ("include_hour_min=True", Severity.ERROR),
        ("True", Severity.ERROR),
        ("include_hour_min=precise", Severity.ERROR),  # not known: the finer branch stays
    )
] + [
    ("both_branches()", Severity.ERROR),  # the time is in both branches' text
    ("both_branches(verbose=True)", Severity.ERROR),
    ("rebound()", Severity.ERROR),  # the parameter is reassigned: no branch is chosen
]


def _calls() -> tuple[str, list[tuple[int, Severity]]]:
    """ASK followed by one caller per case, and the line (within that text) of each
    caller's ``return`` with the severity its PC001 must have."""
    lines = ASK.split("\n")
    want = []
    for number, (call, severity) in enumerate(CASES):
        lines += ["", "", f"def case_{number}(question: str, precise: bool):"]
        lines.append(f"    return ask(question, {call})")
        want.append((len(lines), severity))
    return "\n".join(lines) + "\n", want


def test_each_call_gets_the_precision_of_the_branch_it_takes() -> None:
    calls, want = _calls()
    offset = HELPER.count("\n")
    found = time_findings(lint_source(HELPER + calls, "app.py").diagnostics)
    assert found == [(line + offset, severity) for line, severity in want]


def test_the_branch_is_chosen_across_modules(tmp_path: Path) -> None:
    calls, want = _calls()
    names = "assigned, both_branches, overwritten, rebound, returned, returned_early"
    for found in time_findings_across_modules(tmp_path, HELPER, names, calls):
        assert found == [(line + 1, severity) for line, severity in want]
