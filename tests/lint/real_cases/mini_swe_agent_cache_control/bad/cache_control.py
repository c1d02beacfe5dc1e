"""Add Anthropic cache breakpoints to a chat history."""

import copy


def _set_cache_control(entry: dict) -> None:
    text = entry["content"] if isinstance(entry["content"], str) else entry["content"][0]["text"]
    entry["content"] = [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def set_cache_control(messages: list[dict]) -> list[dict]:
    messages = copy.deepcopy(messages)
    for entry in messages:
        if entry["role"] == "user":
            _set_cache_control(entry)  # PC007: 12
    return messages
