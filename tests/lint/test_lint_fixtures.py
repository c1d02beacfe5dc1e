"""Every rule's fixtures: the flagged set of (line, column, code) equals the inline markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_markers import FIXTURES, expected_markers, fixture_config

from promptcache.lint_rules import lint_source
from promptcache.lint_rules.registry import RULES

CASES = sorted(p for p in FIXTURES.glob("PC*.py") if not p.name.endswith(".fixed.py"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_fixture_flags_exactly_the_marked_lines(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    result = lint_source(source, str(path), fixture_config(path, source))
    got = {(d.location.line, d.location.col, d.code) for d in result.diagnostics}
    want = expected_markers(source)
    assert got == want, (
        f"unexpected: {sorted(got - want)}\nmissing: {sorted(want - got)}\n"
        + "\n".join(
            f"{d.location.line}:{d.location.col} {d.code} {d.message}" for d in result.diagnostics
        )
    )


def test_every_rule_has_a_flagged_fixture_line() -> None:
    covered: dict[str, int] = {}
    for path in CASES:
        source = path.read_text(encoding="utf-8")
        for _, _, code in expected_markers(source):
            covered[code] = covered.get(code, 0) + 1
    missing = sorted(set(RULES) - set(covered) - {"PC000"})
    assert not missing, f"rules without a flagged fixture line: {missing}"


def test_pc010_counts_the_static_text_after_the_varying_part() -> None:
    """PC010's "comes before N characters of static text" is the length of the static text
    between the varying part and the next one, counted here from the text itself: the
    newline written in the f-string counts, not only the longest piece, so do a join's
    separators, and a piece of unknown length makes it "at least"."""
    rules = "Always cite the policy section you rely on. " * 60
    half = "Answer in the language of the question. " * 40
    source = (
        "import datetime\nimport anthropic\nclient = anthropic.Anthropic()\n"
        f"RULES = {rules!r}\nHALF = {half!r}\n"
        "def ask(q, user):\n"
        "    now = datetime.datetime.now()\n"
        "    client.messages.create(model='m', system=f'Now: {now}\\n{RULES}', messages=[q])\n"
        "    client.messages.create(model='m', system=f'{user}\\n{HALF}\\n{HALF}.', messages=[q])\n"
        "    client.messages.create(\n"
        "        model='m', system=f'{user}\\n{RULES}{open(\"extra.txt\").read()}', messages=[q]\n"
        "    )\n"
        "    client.messages.create(model='m', system='\\n\\n'.join([user, HALF, HALF]))\n"
        "    client.messages.create(model='m', system='\\n\\n'.join([user, HALF, user, HALF]))\n"
    )
    result = lint_source(source, "app.py", fixture_config(Path("PC010.py"), source))
    counts = {
        d.location.line: d.message.split(" comes before ", 1)[1].split(" characters", 1)[0]
        for d in result.diagnostics
    }
    assert counts == {
        8: str(len(f"\n{rules}")),
        9: str(len(f"\n{half}\n{half}.")),
        11: "at least " + str(len(f"\n{rules}")),
        13: str(len("\n\n".join(["", half, half]))),  # the separators count
        # line 14: a varying part between the halves leaves 1,602 characters after each
    }, result.diagnostics


def test_pc016_budget_window_names_the_helper_and_the_send() -> None:
    """A window chosen by a budget helper (``PC016_budget_trim.py``) is reported where the
    helper is called, and its chain names the line where the helper's walk stops and the call
    that sends the window."""
    path = FIXTURES / "PC016_budget_trim.py"
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    result = lint_source(source, str(path), fixture_config(path, source))
    (finding,) = [d for d in result.diagnostics if d.location.line == 96]
    assert "`trim_history_to_token_limit`" in finding.message
    assert "`self.history`" in finding.message
    stop, sent = finding.related
    assert lines[stop.location.line - 1].strip() == "if total + count(message) > max_tokens:"
    assert "`trim_history_to_token_limit` walks `history`" in stop.message
    assert "client.chat.completions.create(" in lines[sent.location.line - 1]
    assert sent.message == "the history is sent here"


def test_legacy_openai_chat_call_names_the_time_and_the_call() -> None:
    """The pre-1.0 SDK's ``openai.ChatCompletion.create`` (``PC001_legacy_openai.py``) is the
    chat completions sink under its own name: the time's finding names that call and its chain
    starts where the time is read."""
    path = FIXTURES / "PC001_legacy_openai.py"
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    result = lint_source(source, str(path), fixture_config(path, source))
    (finding,) = [d for d in result.diagnostics if d.location.line == 20]
    assert finding.code == "PC001"
    assert "(ChatCompletion.create(messages=))" in finding.message
    (born,) = finding.related
    assert "datetime.now()" in lines[born.location.line - 1]
    assert born.location.line == 17 and born.message == "datetime.now() is born here"
