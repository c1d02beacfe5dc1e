"""A time formatted to the minute in one branch of an ``if`` statement on a parameter and to
the day in the other (``if include_hour_min:`` / ``if not include_hour_min:``, the branches
assigning the text or returning it, or one branch returning before the other's code): each
call is reported at the precision of the branch its argument, or the default it leaves,
takes; a call whose argument is not a literal, or a helper that reassigns the parameter,
keeps the finer one. A time both branches hold is reported whatever the argument. The same
across modules (the helper's summary read from its export)."""

from __future__ import annotations

from pathlib import Path

from branch_requests import ASK

from promptcache.lint_rules import Severity, lint_source
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

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


#: what each severity's message says of how often the time changes
OFTEN = {Severity.INFO: "it changes once a day", Severity.ERROR: "it changes more than once a day"}


def _time_findings(diagnostics: object) -> list[tuple[int, Severity]]:
    found = [d for d in diagnostics if d.code == "PC001"]  # type: ignore[attr-defined]
    for d in found:
        assert OFTEN[d.severity] in d.message
    return sorted((d.location.line, d.severity) for d in found)


def test_each_call_gets_the_precision_of_the_branch_it_takes() -> None:
    calls, want = _calls()
    offset = HELPER.count("\n")
    found = _time_findings(lint_source(HELPER + calls, "app.py").diagnostics)
    assert found == [(line + offset, severity) for line, severity in want]


def test_the_branch_is_chosen_across_modules(tmp_path: Path) -> None:
    calls, want = _calls()
    names = "assigned, both_branches, overwritten, rebound, returned, returned_early"
    (tmp_path / "prompt_utils.py").write_text(HELPER, encoding="utf-8")
    (tmp_path / "app.py").write_text(f"from prompt_utils import {names}\n{calls}", encoding="utf-8")
    config = parse_table({}, tmp_path, KNOWN_CODES)
    for cache_dir in (None, tmp_path / "cache", tmp_path / "cache"):  # off, cold, warm
        results = lint_paths([tmp_path], config, jobs=1, cache_dir=cache_dir)
        found = _time_findings(d for r in results for d in r.diagnostics)
        assert found == [(line + 1, severity) for line, severity in want]
