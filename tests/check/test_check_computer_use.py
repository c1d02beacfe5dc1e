"""A computer-use agent under check (programs/computer_use_date.py, the official anthropic
client): the definitions the API adds for its own tools count toward the cached prefix, and a
date written with its weekday and month name is the clock's in every part that changes."""

from __future__ import annotations

from pathlib import Path

from check_support import check_program

from promptcache import builtin_tools


def test_the_apis_own_tools_count_toward_the_prefix_a_breakpoint_caches(tmp_path: Path) -> None:
    # the request's own text is about 854 tokens up to the system breakpoint (26 + 18 + 13 for
    # the three tools as sent, 797 for the system prompt), below claude-sonnet-4-5's 1024; the
    # API adds 735 + 700 + 245 tokens of tool definitions before it, so the breakpoint writes
    # about 2,534 tokens and a new date there is a cache break, not a note about short prompts
    result, _ = check_program(tmp_path, "computer_use_date.py", "%Y-%m-%d")
    assert [(f.rule, f.check, f.path, f.causes) for f in result.findings] == [
        ("PC001", "difference", "system[0].text", ("clock",))
    ]
    assert result.notes == []


def test_a_day_of_the_month_beside_its_month_name_is_the_clock(tmp_path: Path) -> None:
    # "Sunday, December 6, 2026" against "Monday, December 7, 2026": the weekday and the day
    # are two changed stretches; the day, a bare number beside its month name, is the clock's
    # too: one finding for the one date, not a second one (PC002) for the number
    result, _ = check_program(tmp_path, "computer_use_date.py", "%A, %B %-d, %Y")
    assert [(f.rule, f.path, f.causes) for f in result.findings] == [
        ("PC001", "system[0].text", ("clock",))
    ]


def test_a_prefix_below_the_minimum_with_the_apis_tools_says_how_much_they_add(
    tmp_path: Path,
) -> None:
    result, _ = check_program(tmp_path, "computer_use_date.py", "%Y-%m-%d", "short")
    [finding] = [f for f in result.findings if f.rule == "PC008"]
    # 13 tokens for the bash tool as sent, 10 for "Today is 2026-12-06." in cl100k_base ("Today",
    # " is", " ", "202", "6", "-", "12", "-", "06", "."), and 245
    # the API adds for its bash tool
    assert finding.message.startswith(
        "the breakpoint at system[0] closes a prefix of about 268 tokens (245 of them the "
        "API's own tools' definitions), below claude-sonnet-4-5-20250929's minimum of 1024"
    )


def test_the_docs_give_the_tool_definitions_check_counts() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "check.md").read_text(encoding="utf-8")
    assert (
        "735 tokens for the computer tool (683 for `computer_20241022`), 700 for the text "
        "editor, 245 for bash" in " ".join(docs.split())
    )
    counted = {p.pattern: n for p, n in builtin_tools.BUILTIN_TOOL_TOKENS}
    assert counted == {
        "computer_20241022": 683,
        r"computer_\d{8}": 735,
        r"text_editor_\d{8}": 700,
        r"bash_\d{8}": 245,
    }
