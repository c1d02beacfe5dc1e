"""Stream one chat turn from Anthropic with the built system message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic

from .system_message import build_system_message

client = anthropic.AsyncAnthropic()


async def stream_response(
    memory: tuple[str, str], persona: str, skills: list[str | None], history: list[dict[str, Any]]
) -> AsyncIterator[str]:
    stable, volatile = memory
    async with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=4096,
        system=build_system_message(stable, volatile, persona, skills),
        messages=history,
    ) as stream:
        async for text in stream.text_stream:
            yield text
