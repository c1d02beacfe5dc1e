"""Severity follows how often the text changes. PC004: a set of strings (per process) and tasks
in the order they finish (per run) are errors; a directory listing, stable on one machine while
the folder is unchanged, is info, the cost of a day-precision date. PC003: a dict built in a
set's order is a warning; stored tool-call arguments, whose key order a store changes at most
once per call, are info."""

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


STORED_ARGUMENTS = """
import json

import openai


def replay(turns: list[dict]) -> list[dict]:
    out = []
    for turn in turns:
        function = {"name": turn["tool"], "arguments": json.dumps(turn["args"])}
        call = {"id": turn["id"], "type": "function", "function": function}
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
    return out


def ask(turns: list[dict], names: set[str], question: str):
    shown = json.dumps({name: turns[0]["args"].get(name) for name in names})
    return openai.OpenAI().chat.completions.create(
        model="gpt-5",
        messages=[
            {"role": "system", "content": "Shown: " + shown},
            *replay(turns),
            {"role": "user", "content": question},
        ],
    )
"""


def test_pc003_on_stored_tool_arguments_is_info_and_on_a_set_built_dict_a_warning() -> None:
    found = [d for d in lint_source(STORED_ARGUMENTS, "app.py").diagnostics if d.code == "PC003"]
    # (severity, where it enters the request, where it was serialised)
    assert sorted((d.severity, d.location.line, d.related[0].location.line) for d in found) == [
        (Severity.INFO, 22, 10),
        (Severity.WARNING, 21, 17),
    ]
    # each says how often its text changes: once per call stored, or between requests
    by_severity = {d.severity: d.message for d in found}
    assert "can change once per call stored" in by_severity[Severity.INFO]
    assert "between requests" not in by_severity[Severity.INFO]
    assert "can change between requests" in by_severity[Severity.WARNING]


SET_OF_LISTING = """
import os
from pathlib import Path

import anthropic

client = anthropic.Anthropic()


def ask(question: str, folders: list[str]):
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=500,
        system="Skills: " + ", ".join({source}),
        messages=[{{"role": "user", "content": question}}],
    )
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # the set's own order is what reaches the text: the listing's order it was filled in
        # is gone, so only the set is reported
        ("{p.stem for p in Path('skills').glob('*.md')}", ["a set comprehension"]),
        ("{name.upper() for name in os.listdir('skills')}", ["a set comprehension"]),
        # each element joins a listing: that order stays in the element's text
        (
            "{'; '.join(os.listdir(folder)) for folder in folders}",
            ["a set comprehension", "os.listdir()"],
        ),
    ],
)
def test_a_set_built_from_a_listing_keeps_only_its_own_order(
    source: str, expected: list[str]
) -> None:
    found = [
        d
        for d in lint_source(SET_OF_LISTING.format(source=source), "app.py").diagnostics
        if d.code == "PC004"
    ]
    origins = sorted(d.message.split("iteration over ", 1)[1].split(" feeds", 1)[0] for d in found)
    assert origins == sorted(expected)
    assert all(
        d.severity is (Severity.ERROR if "set" in d.message.split(" feeds")[0] else Severity.INFO)
        for d in found
    )
