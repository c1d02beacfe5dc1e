"""The OpenAI plugin: one chat completion with the agent's tool context."""

from __future__ import annotations

from openai import AsyncOpenAI

from .tool_context import ToolContext

client = AsyncOpenAI()


async def chat(tool_ctx: ToolContext, messages: list[dict]) -> str:
    response = await client.chat.completions.create(
        model="gpt-5-mini",
        messages=messages,
        tools=tool_ctx.parse_function_tools(),
    )
    return response.choices[0].message.content or ""
