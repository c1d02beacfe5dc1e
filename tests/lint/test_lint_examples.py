"""The example app full of cache breakers is flagged at the right lines; its twin is clean;
``--fix`` turns the fixable findings into code the linter accepts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from promptcache.cli import cli
from promptcache.lint_rules import LintConfig, lint_paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXPECTED = {
    ("mcp_agent.py", 31, "PC016"),  # self.history = self.history[-20:]
    ("mcp_agent.py", 33, "PC007"),  # cache_control on every message
    ("mcp_agent.py", 37, "PC011"),  # haiku or sonnet per question
    ("mcp_agent.py", 40, "PC005"),  # MCP tools unsorted
    ("openai_chat.py", 21, "PC001"),  # time in the system message
    ("openai_chat.py", 28, "PC013"),  # prompt_cache_key=str(uuid.uuid4())
    ("support_bot.py", 30, "PC008"),  # a breakpoint on one short tool
    # build_system_prompt() returns these, and they reach system= at line 55
    ("support_bot.py", 55, "PC001"),  # Current time: {now}
    ("support_bot.py", 55, "PC002"),  # Request id: {request_id}
    ("support_bot.py", 55, "PC003"),  # json.dumps(profile), its keys in a set's order
    ("support_bot.py", 55, "PC004"),  # ", ".join(PRODUCTS), a set
    ("support_bot.py", 56, "PC014"),  # 1h after the tool's 5m breakpoint
}
FIXABLE = {"PC003", "PC004", "PC005", "PC014"}


def _found(folder: Path) -> set[tuple[str, int, str]]:
    results = lint_paths([folder], LintConfig(root=folder), jobs=1)
    return {(Path(r.path).name, d.location.line, d.code) for r in results for d in r.diagnostics}


def test_naive_app_is_flagged_at_the_right_lines() -> None:
    assert _found(EXAMPLES / "lint_app") == EXPECTED


def test_fixed_twin_is_clean() -> None:
    assert _found(EXAMPLES / "lint_app_fixed") == set()


def test_fix_leaves_only_findings_without_an_autofix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "app"
    shutil.copytree(EXAMPLES / "lint_app", app)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["lint", "app", "--fix"], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # unfixable errors remain
    left = _found(app)
    assert {code for _, _, code in left} & FIXABLE == set()
    assert left == {item for item in EXPECTED if item[2] not in FIXABLE}
    fixed = (app / "support_bot.py").read_text()
    assert "json.dumps(profile, sort_keys=True)" in fixed
    assert "', '.join(sorted(PRODUCTS))" in fixed
