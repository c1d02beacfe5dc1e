"""The text report gives each finding's severity after its code (``PC004 info:``), the same as
JSON's ``severity`` for that finding; an unproven flow under ``--explain`` is no finding and
shows none."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli

APP = """\
import json
import os
from datetime import datetime

import anthropic
from vendored_helpers import render

client = anthropic.Anthropic()


def ask(question: str):
    skills = "\\n".join(name for name in os.listdir("skills"))
    tags = ", ".join({"billing", "refunds", "shipping"})
    flags = json.dumps({tag: True for tag in {"beta", "eu"}})
    return client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=500,
        system=f"Skills:\\n{skills}\\nTags: {tags}\\nFlags: {flags}\\n" + render(datetime.now()),
        messages=[{"role": "user", "content": question}],
    )
"""


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def _lint(project: Path, *args: str, stream: str = "stdout") -> str:
    cwd = Path.cwd()
    os.chdir(project)
    try:
        result = CliRunner().invoke(cli, ["lint", "app.py", "--no-cache", *args])
        return str(getattr(result, stream))
    finally:
        os.chdir(cwd)


def test_each_text_line_names_the_severity_json_gives(project: Path) -> None:
    items = json.loads(_lint(project, "--format", "json"))
    expected = sorted(
        (item["location"]["row"], item["location"]["column"], item["code"], item["severity"])
        for item in items
    )
    # the case holds one finding of each severity, so a line that printed the wrong one fails
    assert sorted({e[3] for e in expected}) == ["error", "info", "warning"]
    lines = [line for line in _lint(project).splitlines() if line.startswith("app.py:")]
    found = []
    for line in lines:
        _, row, column, rest = line.split(":", 3)
        code, _, rest = rest.strip().partition(" ")
        rest = rest.removeprefix("[*] ")
        severity, colon, _ = rest.partition(": ")
        assert colon, line
        found.append((int(row), int(column), code, severity))
    assert sorted(found) == expected


def test_an_unproven_flow_shows_no_severity(project: Path) -> None:
    text = _lint(project, "--explain", stream="output")
    notes = text.split("\nexplain: ", 1)[1].splitlines()[1:]
    assert notes and all(" PC001 time value " in note for note in notes)
