"""The process id in a system prompt (``f"You are worker {os.getpid()}."``): `check` reports it
as PC002 caused by the process id, since its two runs are two processes and send two prefixes,
while `lint` leaves it (one prefix per worker process, the same on every request that worker
serves), as docs/check.md says. Real child processes through the official openai client and
the real capture endpoint."""

from __future__ import annotations

import textwrap
from pathlib import Path

from check_support import check_source

from promptcache.check.output import render
from promptcache.lint_rules import lint_source

_ASK = """
import os
from openai import OpenAI

RULES = "Answer briefly and politely. " * 300


def ask(question):
    system = f"You are worker {os.getpid()}. {RULES}"
    return OpenAI().chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
    )


for question in ["hi", "how are you"]:
    ask(question)
"""


def test_check_reports_the_process_id_and_lint_leaves_it(tmp_path: Path) -> None:
    source = textwrap.dedent(_ASK)
    result = check_source(tmp_path, "app.py", source)
    assert [(f.rule, f.causes) for f in result.findings] == [("PC002", ("pid",))]
    text = render(result, "text")
    assert "inside the cacheable prefix; caused by the process id" in text
    assert "seen in 2 requests from this call site" in text
    assert not lint_source(source, "app.py").diagnostics
