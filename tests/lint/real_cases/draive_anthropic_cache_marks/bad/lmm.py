"""Convert the model context (user and assistant turns) into Anthropic message params."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TextPart:
    text: str


@dataclass
class ImagePart:
    url: str


@dataclass
class Turn:
    role: str
    parts: list[TextPart | ImagePart] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def convert_part(part: TextPart | ImagePart, cache: bool = False) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {
            "type": "text",
            "text": part.text,
            "cache_control": {"type": "ephemeral"} if cache else None,
        }
    return {
        "type": "image",
        "source": {"type": "url", "url": part.url},
        "cache_control": {"type": "ephemeral"} if cache else None,
    }


def turn_as_message(turn: Turn) -> dict[str, Any]:
    cached = turn.meta.get("cache") == "ephemeral"
    return {
        "role": turn.role,
        "content": [convert_part(part, cache=cached) for part in turn.parts],  # PC007: 20
    }
