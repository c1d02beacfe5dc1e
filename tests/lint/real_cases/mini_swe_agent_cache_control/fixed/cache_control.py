"""Add Anthropic cache breakpoints to a chat history."""

import copy


def _set_cache_control(entry: dict) -> None:
    text = entry["content"] if isinstance(entry["content"], str) else entry["content"][0]["text"]
    entry["content"] = [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def set_cache_control(messages: list[dict]) -> list[dict]:
    messages = copy.deepcopy(messages)
    new_messages = []
    for i, entry in enumerate(reversed(messages)):
        if i == 0:  # only the newest message carries a breakpoint
            _set_cache_control(entry)
        new_messages.append(entry)
    return list(reversed(new_messages))
