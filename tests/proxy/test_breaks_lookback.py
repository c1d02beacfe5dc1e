"""The explainer's lookback reasons on Bedrock Converse bodies, and ``tokens_lost``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_breaks import Driver, _record, body

from promptcache.proxy.breaks import (
    BREAK_REASONS,
    READS_KEPT_REASONS,
    BreakExplainer,
    tokens_lost,
)
from promptcache.proxy.store import RequestStore

CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA = "amazon.nova-pro-v1:0"
POINT = {"cachePoint": {"type": "default"}}


def converse(model: str, extra_blocks: int) -> dict[str, Any]:
    """A Converse body whose last message holds ``extra_blocks`` text blocks, then a cachePoint."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"text": "the task"}]},
        {"role": "assistant", "content": [{"text": "on it"}]},
    ]
    if extra_blocks:
        blocks = [{"text": f"file part {i}"} for i in range(extra_blocks)]
        messages.append({"role": "user", "content": blocks})
    messages[-1]["content"].append(POINT)
    return {
        "modelId": model,
        "system": [{"text": "You are the build agent. " * 50}],
        "messages": messages,
    }


@pytest.mark.parametrize(
    ("model", "appended", "reason"),
    [
        (CLAUDE, 20, None),  # 20 positions after the last write: still read
        (CLAUDE, 21, "lookback_exceeded"),
        (NOVA, 21, None),  # no lookback documented for Nova: nothing claimed
    ],
)
def test_bedrock_lookback_for_claude_only(model: str, appended: int, reason: str | None) -> None:
    d = Driver(vendor="bedrock")
    first = converse(model, 0)
    assert d.send(first, 0, api="bedrock_converse").reason == "new_prefix"
    later = converse(model, appended)  # the cachePoint moved to the new tail
    result = d.send(later, 10, api="bedrock_converse", read=0, write=500)
    assert result.reason == reason
    if reason:
        assert result.segment == "messages[2].content[21]"  # the cachePoint block
        assert result.excerpt is not None and result.excerpt.startswith("21 block positions")


def test_tokens_lost_subtracts_reads_for_the_structural_reasons() -> None:
    assert set(READS_KEPT_REASONS) <= set(BREAK_REASONS)
    # a lookback miss that still read the 300-token system breakpoint lost 1000 - 300
    assert tokens_lost("lookback_exceeded", 1500, 300, 1000) == 700
    # the older reasons keep the rollup's definition: capped at the predecessor's cache
    assert tokens_lost("system_changed", 1500, 300, 1000) == 1000
    assert tokens_lost("breakpoint_moved", 900, 800, 1000) == 100
    assert tokens_lost(None, 1500, 0, 1000) is None
    assert tokens_lost("new_prefix", 1500, 0, None) is None


def test_a_lookback_miss_after_a_restart_counts_the_logged_predecessor(tmp_path: Path) -> None:
    # the rebuilt snapshot (hashes only, no stored body) still knows what its entry held
    store = RequestStore(tmp_path / "log.db")
    store.start()
    messages = ["task", "on it"]
    first = _record(body(messages=messages), "r1", 1000.0, stored=False)
    BreakExplainer()(first)
    store.submit(first.as_row())
    store.close()

    explainer = BreakExplainer()
    assert explainer.load(tmp_path / "log.db", since=0) == 1
    later = body(messages=[*messages, *(f"turn {i}" for i in range(21))])
    after = _record(later, "r2", 1010.0, stored=False)
    explainer(after)
    assert (after.break_reason, after.previous_request_id) == ("lookback_exceeded", "r1")
    # r1 held its 2000 written tokens; r2 read nothing and lost them all
    assert after.break_tokens_lost == 2000


def test_a_new_conversation_on_the_same_system_prompt_is_not_a_moved_breakpoint() -> None:
    d = Driver()
    long_chat = body(messages=["task", *(f"turn {i}" for i in range(30))])
    d.send(body(messages=["task", *(f"turn {i}" for i in range(28))]), 0)
    assert d.send(long_chat, 10).reason is None
    # the first turn of another conversation: same system, a new first question
    assert d.send(body(messages=["another task"]), 20).reason is None


def test_the_report_names_a_fix_for_each_lookback_reason() -> None:
    from promptcache.proxy.report.advice import FIXES

    assert "20 block positions" in FIXES["lookback_exceeded"]
    assert "structural" in FIXES["anchor_changed"]
    assert "earlier" in FIXES["breakpoint_moved"]
