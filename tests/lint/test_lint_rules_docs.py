"""Rule metadata: one module per rule, docstring sections, and docs/lint.md kept in step."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from promptcache.errors import UnknownRuleError
from promptcache.lint_rules import RULES, get_rule

DOCS = Path(__file__).resolve().parents[2] / "docs" / "lint.md"
SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "References")


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_docstring_has_ruff_sections(code: str) -> None:
    rule = RULES[code]
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    assert not rule.name.startswith(("no-", "disallow", "banned"))
    for section in SECTIONS:
        assert rule.sections.get(section), f"{code} lacks '## {section}'"
    if code != "PC000":
        # every reference carries the date it was last read
        assert re.search(r"checked 20\d\d-\d\d-\d\d", rule.sections["References"])
    if rule.fix.value != "none":
        assert rule.sections.get("Fix safety"), f"{code} offers a fix but no '## Fix safety'"


def test_docs_rule_table_matches_the_registry() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = re.findall(r"^\| (PC\d{3}) \| `([a-z0-9-]+)` \| (\w+) \| (\w+) \| (.+) \|$", text, re.M)
    assert [(c, n, s, f, summary) for c, n, s, f, summary in rows] == [
        (r.code, r.name, str(r.severity), r.fix.value, r.summary) for r in RULES.values()
    ]


def test_get_rule_rejects_unknown_codes() -> None:
    assert get_rule(" pc004 ").code == "PC004"
    with pytest.raises(UnknownRuleError, match="known rules: PC000"):
        get_rule("PC4")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


#: PC000's Example is a file that does not parse, on purpose.
_UNPARSABLE_ON_PURPOSE = {("PC000", "Example")}


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_example_code_blocks_compile(code: str) -> None:
    """The Example and Use instead blocks are Python a reader can paste: a rule docstring that
    is not raw turns ``"\\n"`` in an example into a real newline (an unterminated string)."""
    rule = RULES[code]
    for title in ("Example", "Use instead"):
        blocks = _python_blocks(rule.sections[title])
        assert blocks, f"{code} '## {title}' has no ```python block"
        if (code, title) in _UNPARSABLE_ON_PURPOSE:
            continue
        for block in blocks:
            ast.parse(block, filename=f"{code} {title}")


def test_rules_command_and_sarif_help_show_the_examples_as_written() -> None:
    from click.testing import CliRunner

    from promptcache.cli import cli
    from promptcache.lint_rules.sarif import rule_descriptors

    shown = CliRunner().invoke(cli, ["rules", "PC001"])
    assert shown.exit_code == 0, shown.output
    assert 'f"Current time: {datetime.now():%H:%M}\\n" + INSTRUCTIONS' in shown.output
    (pc003,) = [d for d in rule_descriptors() if d["id"] == "PC003"]
    for block in _python_blocks(pc003["help"]["markdown"]):
        ast.parse(block)
