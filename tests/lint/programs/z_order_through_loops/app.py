"""A user turn that joins a set is the newest message, not the system text the formatter
gathers; a tool dict filled from the servers' list_tools() keeps their order unless it is sorted."""

from __future__ import annotations

import anthropic
from mcp import ClientSession

from .helpers import Message, by_name_sorted, in_order, system_text

client = anthropic.AsyncAnthropic()


async def answer(topics: set[str]) -> str:
    messages = [Message("system", "You answer questions."), Message("user", ", ".join(topics))]
    response = await client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        system=system_text(messages),
        messages=[{"role": m.role, "content": m.content} for m in messages if m.role != "system"],
    )
    return response.content[0].text


async def tools_of(sessions: list[ClientSession]) -> dict[str, dict]:
    listed = [t for session in sessions for t in (await session.list_tools()).tools]
    return {t.name: {"name": t.name, "input_schema": t.inputSchema} for t in listed}


async def ask(sessions: list[ClientSession], question: str) -> str:
    response = await client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        tools=in_order(await tools_of(sessions)),  # PC005: 14
        messages=[{"role": "user", "content": question}],
    )
    return response.content[0].text


async def ask_sorted(sessions: list[ClientSession], question: str) -> str:
    response = await client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=512,
        tools=by_name_sorted(await tools_of(sessions)),
        messages=[{"role": "user", "content": question}],
    )
    return response.content[0].text
