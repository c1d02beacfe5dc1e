"""Build the chat system message: grounding memory, persona, then the tail blocks."""

from __future__ import annotations

from typing import Any


def _text(text: str, cached: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cached:
        block["cache_control"] = {"type": "ephemeral"}
    return block


def build_system_message(
    stable_memory: str,
    volatile_memory: str,
    system_prompt: str,
    tail_blocks: list[str | None],
) -> list[dict[str, Any]]:
    """Anthropic system blocks; `tail_blocks` are steering, skills, the skill catalog, notes."""
    parts = [_text(stable_memory.strip(), cached=True)]
    if volatile_memory.strip():
        parts.append(_text(volatile_memory.strip(), cached=False))
    if system_prompt.strip():
        parts.append(_text(system_prompt.strip(), cached=True))
    for block in tail_blocks:
        if block:
            parts.append(_text(block, cached=True))  # PC007: 25
    return parts
