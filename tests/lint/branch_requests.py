"""The request a time helper's text is sent in, shared by the tests of a time's precision
per branch or format (test_lint_branch_params, test_lint_branch_statements,
test_lint_format_choices): ``ask(question, text)`` puts ``text`` at the start of the system
message, ahead of about 2,900 characters of rules. Also the PC001 findings such a test reads,
in one module or across two."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from promptcache.lint_rules import Diagnostic, Severity
from promptcache.lint_rules.config import parse_table
from promptcache.lint_rules.registry import KNOWN_CODES
from promptcache.lint_rules.runner import lint_paths

ASK = """
import openai

client = openai.OpenAI()
RULES = "Answer briefly and cite the manual. " * 80


def ask(question: str, text: str):
    return client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": f"{text}\\n{RULES}"},
            {"role": "user", "content": question},
        ],
    )
"""

#: what each severity's PC001 message says of how often the time changes
OFTEN = {Severity.INFO: "it changes once a day", Severity.ERROR: "it changes more than once a day"}


def time_findings(diagnostics: Iterable[Diagnostic]) -> list[tuple[int, Severity]]:
    """The (line, severity) of each PC001 finding, sorted; each message must say how often its
    time changes (``OFTEN``)."""
    found = [d for d in diagnostics if d.code == "PC001"]
    for d in found:
        assert OFTEN[d.severity] in d.message, d.message
    return sorted((d.location.line, d.severity) for d in found)


def time_findings_across_modules(
    tmp_path: Path, helper: str, names: str, calls: str
) -> Iterator[list[tuple[int, Severity]]]:
    """``helper`` as prompt_utils.py and ``calls`` as app.py below ``from prompt_utils import
    names`` (so app.py's line N is line N - 1 of ``calls``), linted as one tree with the cache
    off, cold and warm: the ``time_findings`` of each of the three runs."""
    (tmp_path / "prompt_utils.py").write_text(helper, encoding="utf-8")
    (tmp_path / "app.py").write_text(f"from prompt_utils import {names}\n{calls}", encoding="utf-8")
    config = parse_table({}, tmp_path, KNOWN_CODES)
    for cache_dir in (None, tmp_path / "cache", tmp_path / "cache"):  # off, cold, warm
        results = lint_paths([tmp_path], config, jobs=1, cache_dir=cache_dir)
        yield time_findings(d for r in results for d in r.diagnostics)
