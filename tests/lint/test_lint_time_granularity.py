"""One time value formatted both to the second and to the day, in one prompt, is one PC001
finding at that place: the error (it changes every request), not also the daily info."""

from __future__ import annotations

import pytest

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


NUMBER_SPEC = """
import time
from datetime import datetime

import openai

client = openai.OpenAI()


def ask(question: str):
    return client.chat.completions.create(
        model="gpt-5",
        messages=[
            {"role": "system", "content": f"t={time.time():.0f}"},
            {"role": "user", "content": question},
        ],
    )
"""


@pytest.mark.parametrize("spec", [".0f", ",.0f", ".3f", ">12"])
def test_a_number_spec_on_a_time_keeps_its_seconds(spec: str) -> None:
    # ``.0f`` of time.time() is the second: no strftime pattern, so no date it reduces to
    source = NUMBER_SPEC.replace(":.0f}", ":" + spec + "}")
    found = [d for d in lint_source(source, "app.py").diagnostics if d.code == "PC001"]
    assert [(d.location.line, d.severity) for d in found] == [(14, Severity.ERROR)]
    source = NUMBER_SPEC.replace("time.time():.0f", "int(time.time()):d")
    found = [d for d in lint_source(source, "app.py").diagnostics if d.code == "PC001"]
    assert [(d.location.line, d.severity) for d in found] == [(14, Severity.ERROR)]


def test_a_date_spec_still_reduces_a_time_to_its_day() -> None:
    source = NUMBER_SPEC.replace("time.time():.0f", "datetime.now():%Y-%m-%d")
    found = [d for d in lint_source(source, "app.py").diagnostics if d.code == "PC001"]
    assert [(d.location.line, d.severity) for d in found] == [(14, Severity.INFO)]


def test_a_number_spec_on_a_time_only_compared_is_quiet() -> None:
    source = NUMBER_SPEC.replace(
        '"content": f"t={time.time():.0f}"',
        '"content": "late" if f"{time.time():.0f}" > "1800000000" else "early"',
    )
    assert not [d for d in lint_source(source, "app.py").diagnostics if d.code == "PC001"]


BREAKPOINT_ON_DATE = """
from datetime import date, datetime

import anthropic

client = anthropic.Anthropic()


def ask(question: str, skills: str):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system=[
            {"type": "text", "text": skills},
            {
                "type": "text",
                "text": f"Today is {date.today():%A, %B %d}",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        messages=[{"role": "user", "content": question}],
    )
"""


def test_a_breakpoint_on_a_date_says_it_changes_once_a_day_as_pc001() -> None:
    found = {d.code: d for d in lint_source(BREAKPOINT_ON_DATE, "app.py").diagnostics}
    assert "it changes once a day" in found["PC001"].message
    assert found["PC009"].message.startswith(
        "breakpoint on a block that changes once a day (`date.today()`): it is written afresh "
        "each day"
    )
    assert "every request" not in found["PC009"].message
    # graded as PC001 grades the same date: info, not an error
    assert (found["PC001"].severity, found["PC009"].severity) == (Severity.INFO, Severity.INFO)


def test_a_breakpoint_on_a_time_still_changes_every_request() -> None:
    source = BREAKPOINT_ON_DATE.replace("date.today():%A, %B %d", "datetime.now():%H:%M")
    found = {d.code: d for d in lint_source(source, "app.py").diagnostics}
    assert found["PC009"].message.startswith(
        "breakpoint on a block that changes every request (`datetime.now()`)"
    )
    assert found["PC009"].severity is Severity.ERROR


CACHE_KEY = """
from datetime import datetime
from uuid import uuid4

import openai

client = openai.OpenAI()


def ask(question: str, user_id: str):
    return client.chat.completions.create(
        model="gpt-5",
        messages=[{"role": "user", "content": question}],
        prompt_cache_key=f"{user_id}-{datetime.now():%Y%m%d%H%M}",
    )
"""


@pytest.mark.parametrize(
    ("key", "often"),
    [
        ("datetime.now():%Y%m%d%H%M", "which changes more than once a day"),
        ("datetime.now():%Y%m%d", "which changes once a day"),
        ("uuid4()", "new on every request"),
    ],
)
def test_a_cache_key_from_a_time_says_how_often_it_changes(key: str, often: str) -> None:
    source = CACHE_KEY.replace("datetime.now():%Y%m%d%H%M", key)
    (found,) = [d for d in lint_source(source, "app.py").diagnostics if d.code == "PC013"]
    assert f"prompt_cache_key comes from `{key.split(':')[0]}`, {often}" in found.message
    assert ("new on every request" in found.message) is (key == "uuid4()")
    daily = often == "which changes once a day"
    assert found.severity is (Severity.INFO if daily else Severity.ERROR)
