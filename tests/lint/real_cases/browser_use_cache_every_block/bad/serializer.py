"""Turn the agent's messages into Anthropic message params."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Part:
    text: str


@dataclass
class Message:
    role: str
    parts: list[Part] = field(default_factory=list)
    cache: bool = False


def _cache_control(use_cache: bool) -> dict | None:
    return {"type": "ephemeral"} if use_cache else None


def _text_block(part: Part, use_cache: bool) -> dict:
    block: dict = {"type": "text", "text": part.text}
    marker = _cache_control(use_cache)
    if marker is not None:
        block["cache_control"] = marker
    return block


def serialize_content(parts: list[Part], use_cache: bool) -> list[dict]:
    blocks = []
    for part in parts:
        blocks.append(_text_block(part, use_cache))  # PC007: 22
    return blocks


def serialize_messages(messages: list[Message]) -> list[dict]:
    return [{"role": m.role, "content": serialize_content(m.parts, m.cache)} for m in messages]
