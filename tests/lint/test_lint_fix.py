"""Autofixes: expected output per fixture, idempotence, byte columns, comment preservation."""

from __future__ import annotations

import pytest
from lint_markers import FIXTURES, fixture_config

from promptcache.errors import FixConflictError
from promptcache.lint_rules import LintConfig, TextEdit, lint_source
from promptcache.lint_rules.fix import apply_edits, check_rewrite, fix_source

FIXABLE = ["PC003", "PC004", "PC005", "PC014"]


@pytest.mark.parametrize("code", FIXABLE)
def test_fix_matches_expected_and_is_idempotent(code: str) -> None:
    path = FIXTURES / f"{code}.py"
    source = path.read_text(encoding="utf-8")
    config = fixture_config(path, source)
    fixed, count = fix_source(source, str(path), config)
    assert count > 0
    assert fixed == (FIXTURES / f"{code}.fixed.py").read_text(encoding="utf-8")
    again, count_again = fix_source(fixed, str(path), config)
    assert (again, count_again) == (fixed, 0)
    remaining = lint_source(fixed, str(path), config).diagnostics
    assert all(d.fix is None for d in remaining), remaining


def test_apply_edits_uses_utf8_byte_columns() -> None:
    source = 'x = "é"; y = ", ".join(s)\n'
    col = source.encode().index(b"s)")
    edits = [TextEdit(1, col, 1, col, "sorted("), TextEdit(1, col + 1, 1, col + 1, ")")]
    assert apply_edits(source, edits) == 'x = "é"; y = ", ".join(sorted(s))\n'


def test_fix_keeps_comments_and_formatting() -> None:
    source = (
        "import json\n"
        "import anthropic\n"
        "client = anthropic.Anthropic()\n"
        "def ask(q, fields):\n"
        "    data = {k: fields[k] for k in set(fields)}\n"
        "    # the profile, as JSON\n"
        "    text = json.dumps(  # keep this comment\n"
        "        data,\n"
        "    )\n"
        "    return client.messages.create(model='m', system=text, messages=[q])\n"
    )
    fixed, count = fix_source(source, "app.py", LintConfig())
    assert count == 1
    assert "# keep this comment" in fixed and "# the profile, as JSON" in fixed
    assert "        data, sort_keys=True,\n" in fixed


def test_rewrite_check_refuses_broken_code_and_lost_comments() -> None:
    before = "x = f(a)  # why\n"
    check_rewrite(before, "x = f(sorted(a))  # why\n", "ok.py")
    with pytest.raises(FixConflictError, match="does not parse"):
        check_rewrite(before, "x = f(sorted(a)  # why\n", "bad.py")
    with pytest.raises(FixConflictError, match="drop a comment"):
        check_rewrite(before, "x = f(sorted(a))\n", "lost.py")


_MCP_TOOLS = (
    "import openai\n"
    "client = openai.OpenAI()\n"
    "async def ask(sessions, q, extra):\n"
    "    listed = [t for s in sessions for t in (await s.list_tools()).tools]\n"
    '    tools = [{"name": t.name, "type": "function"} for t in listed]\n'
    "    tools = tools + {added}\n"
    '    return client.responses.create(model="m", tools=tools, input=q)\n'
)


def _pc005_fixes(added: str) -> list[object]:
    source = _MCP_TOOLS.replace("{added}", added)
    return [d.fix for d in lint_source(source, "app.py").diagnostics if d.code == "PC005"]


def test_pc005_fix_key_cannot_raise_on_a_builtin_tool_without_name() -> None:
    (fix,) = _pc005_fixes('[{"type": "web_search"}]')
    assert fix is not None
    key = eval(fix.edits[-1].text.removeprefix(", key=").removesuffix(")"))
    tools = [{"name": "search", "type": "function"}, {"type": "web_search"}]
    assert sorted(tools, key=key) == [{"type": "web_search"}, tools[0]]


def test_pc005_offers_no_fix_when_elements_are_unknown() -> None:
    assert _pc005_fixes("extra") == [None]
    (named,) = _pc005_fixes('[{"name": "calc", "type": "function"}]')
    assert named is not None and 'tool["name"]' in named.edits[-1].text
