"""A condition on a local name bound once to a literal (``precise = False``, then
``fmt = "%H:%M" if precise else "%Y-%m-%d"`` or ``if debug:``) is read as that literal, as a
condition of literals is: the branch it rules out never runs. A name bound again anywhere in
the function (in a branch, later in a loop, by a nested function through ``nonlocal``, by an
import, an ``except ... as`` or a ``match`` capture), a ``global`` name or a parameter keeps
both branches."""

from __future__ import annotations

from branch_requests import time_findings

from promptcache.lint_rules import Severity, lint_source

#: ahead of each test's functions: ``send(question, system)`` puts ``system`` first in the request
SEND = """
from datetime import datetime

import openai

client = openai.OpenAI()
RULES = "Answer briefly and cite the manual. " * 80


def send(question: str, system: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )
"""

FIXED = """

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


def by_an_import(question: str, verbose: bool):
    debug = False
    if verbose:
        from settings import DEBUG as debug
    system = RULES
    if debug:
        system += f" Started {datetime.now()}"
    return send(question, system)


def by_an_except(question: str):
    failed = False
    system = RULES
    try:
        int(question)
    except ValueError as failed:
        if failed:
            system += f" Started {datetime.now()}"
    return send(question, system)


def by_a_match(question: str):
    debug = False
    match question:
        case "debug" as debug:
            pass
    system = RULES
    if debug:
        system += f" Started {datetime.now()}"
    return send(question, system)


def a_global(question: str):
    global DEBUG
    DEBUG = False
    system = RULES
    if DEBUG:
        system += f" Started {datetime.now()}"
    return send(question, system)
"""


def test_a_name_bound_once_to_a_literal_decides_the_branch() -> None:
    """The date format only (the daily info); the time of the untaken branches not at all."""
    found = time_findings(lint_source(SEND + FIXED, "app.py").diagnostics)
    assert found == [(20, Severity.INFO)]


def test_a_name_bound_again_or_passed_in_keeps_both_branches() -> None:
    """Bound again in a branch, later in a loop, through ``nonlocal``, by an import, an
    ``except ... as``, a ``match`` capture, or a ``global`` name: the time may be sent."""
    found = time_findings(lint_source(SEND + REBOUND, "app.py").diagnostics)
    assert found == [
        (24, Severity.ERROR),
        (34, Severity.ERROR),
        (48, Severity.ERROR),
        (55, Severity.ERROR),
        (65, Severity.ERROR),
        (76, Severity.ERROR),
        (87, Severity.ERROR),
        (96, Severity.ERROR),
    ]
