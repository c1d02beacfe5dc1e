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
