"""One time value formatted both to the second and to the day, in one prompt, is one PC001
finding at that place: the error (it changes every request), not also the daily info."""

from __future__ import annotations

from promptcache.lint_rules import Severity, lint_source

SOURCE = """
from datetime import datetime

import openai

client = openai.OpenAI()


def variables() -> dict[str, str]:
    now = datetime.now()
    return {"day": now.strftime("%A"), "clock": now.strftime("%H:%M:%S")}


def ask(template: str, question: str):
    prompt = template.format_map(variables())
    return client.chat.completions.create(
        model="gpt-5",
        messages=[
            {"role": "system", "content": prompt},
            {"role": "user", "content": question},
        ],
    )
"""

DAY_ONLY = SOURCE.replace(', "clock": now.strftime("%H:%M:%S")', "")


def test_a_time_formatted_to_the_second_and_to_the_day_is_one_error() -> None:
    found = [d for d in lint_source(SOURCE, "app.py").diagnostics if d.code == "PC001"]
    assert [(d.location.line, d.severity) for d in found] == [(19, Severity.ERROR)]
    assert found[0].related[0].location.line == 10  # born at datetime.now()


def test_the_same_time_formatted_to_the_day_only_is_info() -> None:
    found = [d for d in lint_source(DAY_ONLY, "app.py").diagnostics if d.code == "PC001"]
    assert [(d.location.line, d.severity) for d in found] == [(19, Severity.INFO)]
