"""One agent turn: call the model with the registry's tools."""

from __future__ import annotations

from openai import AsyncOpenAI

from .registry import ToolRegistry

client = AsyncOpenAI()


async def run_turn(registry: ToolRegistry, messages: list[dict]) -> str:
    response = await client.chat.completions.create(
        model="gpt-5-mini",
        messages=messages,
        tools=registry.get_definitions(),
    )
    return response.choices[0].message.content or ""
