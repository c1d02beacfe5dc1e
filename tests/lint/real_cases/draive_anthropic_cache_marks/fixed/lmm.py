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


def convert_part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": "image", "source": {"type": "url", "url": part.url}}


def turn_as_message(turn: Turn) -> dict[str, Any]:
    content = [convert_part(part) for part in turn.parts]
    if turn.meta.get("cache") == "ephemeral":
        # one breakpoint per cached turn: on its last text or image block
        for block in reversed(content):
            if block["type"] in ("text", "image"):
                block["cache_control"] = {"type": "ephemeral"}
                break
    return {"role": turn.role, "content": content}
