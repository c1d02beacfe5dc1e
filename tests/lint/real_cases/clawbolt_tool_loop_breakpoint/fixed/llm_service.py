"""Anthropic message helpers: where the cache breakpoints go."""

from __future__ import annotations

from typing import Any

EPHEMERAL = {"type": "ephemeral"}


def mark_history_tail(messages: list[dict[str, Any]]) -> None:
    """Put a breakpoint on the last user message before the current one."""
    for i in range(len(messages) - 2, -1, -1):
        entry = messages[i]
        if entry["role"] == "user" and isinstance(entry["content"], str):
            entry["content"] = [
                {"type": "text", "text": entry["content"], "cache_control": EPHEMERAL}
            ]
            return


def mark_in_turn_tail(messages: list[dict[str, Any]]) -> None:
    """Move the in-turn breakpoint to the newest tool result, so each round of the tool loop
    reads the rounds before it from the cache."""
    for entry in messages:
        if entry["role"] == "user" and isinstance(entry["content"], list):
            for block in entry["content"]:
                if block.get("type") == "tool_result":
                    block.pop("cache_control", None)
    last = messages[-1]
    if isinstance(last["content"], list) and last["content"][-1].get("type") == "tool_result":
        last["content"][-1]["cache_control"] = EPHEMERAL
