"""A condition on a local name bound once to a literal (``precise = False``, then
``fmt = "%H:%M" if precise else "%Y-%m-%d"`` or ``if debug:``) is read as that literal, as a
condition of literals is: the branch it rules out never runs. A name bound again anywhere in
the function (in a branch, later in a loop, by a nested function through ``nonlocal``) or a
parameter keeps both branches."""

from __future__ import annotations

from branch_requests import time_findings

from promptcache.lint_rules import Severity, lint_source

FIXED = """
from datetime import datetime

import openai

client = openai.OpenAI()
RULES = "Answer briefly and cite the manual. " * 80


def send(question: str, system: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )


def by_day(question: str):
    precise = False
    fmt = "%H:%M" if precise else "%Y-%m-%d"
    return send(question, f"Date: {datetime.now().strftime(fmt)}\\n{RULES}")


def never_debugged(question: str):
    debug = False
    system = RULES
    if debug:
        system += f" Started {datetime.now()}"
    return send(question, system)


def by_mode(question: str):
    mode = "daily"
    if mode == "live":
        return send(question, f"{datetime.now()}\\n{RULES}")
    return send(question, RULES)
"""

REBOUND = """
from datetime import datetime

import openai

client = openai.OpenAI()
RULES = "Answer briefly and cite the manual. " * 80


def send(question: str, system: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )


def in_a_branch(question: str, verbose: bool):
    debug = False
    if verbose:
        debug = True
    system = RULES
    if debug:
        system += f" Started {datetime.now()}"
    return send(question, system)


def later_in_a_loop(question: str):
    debug = False
    system = RULES
    for _ in range(3):
        if debug:
            system += f" Started {datetime.now()}"
        debug = True
    return send(question, system)


def through_nonlocal(question: str):
    debug = False

    def turn_on():
        nonlocal debug
        debug = True

    turn_on()
    system = RULES
    if debug:
        system += f" Started {datetime.now()}"
    return send(question, system)


def a_parameter(question: str, debug=False):
    system = RULES
    if debug:
        system += f" Started {datetime.now()}"
    return send(question, system)
"""


def test_a_name_bound_once_to_a_literal_decides_the_branch() -> None:
    """The date format only (the daily info); the time of the untaken branches not at all."""
    found = time_findings(lint_source(FIXED, "app.py").diagnostics)
    assert found == [(20, Severity.INFO)]


def test_a_name_bound_again_or_passed_in_keeps_both_branches() -> None:
    found = time_findings(lint_source(REBOUND, "app.py").diagnostics)
    assert found == [
        (24, Severity.ERROR),
        (34, Severity.ERROR),
        (48, Severity.ERROR),
        (55, Severity.ERROR),
    ]
