"""Anthropic's built-in tools in a PromptBuilder: a computer-use prompt's breakpoints are
checked against the model's minimum with the definitions the API adds for those tools counted
(735 for the computer tool, 700 for the text editor, 245 for bash: Anthropic's tool pages,
``promptcache.builtin_tools``), and the rendered request's fingerprint counts the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from promptcache import PromptBuilder
from promptcache.errors import ConfigError
from promptcache.fingerprint import fingerprint_request
from promptcache.tokens import count_tokens

SYSTEM = ("You operate a Linux desktop for the Acme support team. Be careful. " * 40).rstrip()
COMPUTER: dict[str, Any] = {"display_height_px": 768, "display_number": 1, "display_width_px": 1024}
#: Anthropic's tool pages (computer use, text editor, bash; checked 2026-12-06).
DOCUMENTED = 735 + 700 + 245


def computer_use() -> PromptBuilder:
    return (
        PromptBuilder("claude-sonnet-4-5")
        .anthropic_tool("computer_20250124", "computer", **COMPUTER)
        .anthropic_tool("text_editor_20250728", "str_replace_based_edit_tool")
        .anthropic_tool("bash_20250124", "bash")
        .system(SYSTEM)
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


ENTRIES = [
    {"type": "computer_20250124", "name": "computer", **COMPUTER},
    {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    {"type": "bash_20250124", "name": "bash"},
]


def test_a_computer_use_prefix_above_the_minimum_is_not_called_below_it() -> None:
    own = sum(count_tokens(_canonical(e)) for e in ENTRIES) + count_tokens(SYSTEM)
    assert own < 1024 <= own + DOCUMENTED  # below claude-sonnet-4-5's minimum without them
    plan = computer_use().plan_breakpoints("anthropic")
    assert plan.warnings == ()
    assert [(bp.layer, bp.prefix_tokens) for bp in plan.kept][-1] == ("system", own + DOCUMENTED)


def test_the_rendered_tools_and_their_fingerprint_count_the_same() -> None:
    rendered = computer_use().dynamic("Open the order page of order 17.").to_anthropic()
    assert rendered.warnings == ()
    assert [{k: v for k, v in t.items() if k != "cache_control"} for t in rendered["tools"]] == (
        ENTRIES
    )
    fp = fingerprint_request(dict(rendered), "anthropic")
    system_end = max(i for i, s in enumerate(fp.segments) if s.kind == "system")
    [system_breakpoint] = [bp for bp in rendered.breakpoints if bp.layer == "system"]
    assert sum(s.num_tokens or 0 for s in fp.segments[: system_end + 1]) == (
        system_breakpoint.prefix_tokens
    )


def test_only_bash_stays_below_the_minimum() -> None:
    plan = (
        PromptBuilder("claude-sonnet-4-5")
        .anthropic_tool("bash_20250124", "bash")
        .system("Today is 2026-12-06.")
        .plan_breakpoints("anthropic")
    )
    # 13 tokens for the bash entry as sent, 245 the API adds for it, 10 for the date line
    expected = count_tokens(_canonical(ENTRIES[2])) + 245 + count_tokens("Today is 2026-12-06.")
    assert expected == 268
    assert plan.kept == ()
    assert (
        f"system[0] (frozen): cumulative prefix is about {expected} tokens, below"
        in (plan.warnings[-1])
    )


@pytest.mark.parametrize("render", ["to_openai_chat", "to_gemini", "to_bedrock_converse"])
def test_other_vendors_refuse_an_anthropic_tool(render: str) -> None:
    with pytest.raises(ConfigError, match="only to_anthropic"):
        getattr(computer_use().dynamic("Hi."), render)()


def test_a_type_without_a_version_is_refused() -> None:
    with pytest.raises(ConfigError, match="versioned Anthropic tool type"):
        PromptBuilder("claude-sonnet-4-5").anthropic_tool("computer", "computer")


def test_a_parameter_the_builder_sets_is_refused() -> None:
    with pytest.raises(ConfigError, match="'cache_control' is set by the builder"):
        PromptBuilder("claude-sonnet-4-5").anthropic_tool(
            "bash_20250124", "bash", cache_control={"type": "ephemeral"}
        )
