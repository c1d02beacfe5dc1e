"""Requests whose tools come from an adapter's create_all, inherited from a base class of
another module or the adapter's own."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession
from openai import OpenAI

from .adapters.base import ToolAdapter
from .adapters.providers import (
    ChatAdapter,
    ChatAdapterChild,
    ResortingChatAdapter,
    SortedChatAdapter,
)

client = OpenAI()


def _send(tools: list[dict[str, Any]], question: str) -> str:
    messages = [{"role": "user", "content": question}]
    reply = client.chat.completions.create(model="gpt-5-mini", messages=messages, tools=tools)
    return reply.choices[0].message.content or ""


class LocalAdapter(ToolAdapter):
    """A subclass of this module: create_all is still the base's."""

    def convert(self, tool: Any) -> dict[str, Any]:
        return {"name": tool.name}


async def ask(sessions: list[ClientSession], question: str) -> str:
    tools = await ChatAdapter().create_all(sessions)
    return _send(tools, question)  # PC005: 17


async def ask_field(sessions: list[ClientSession], question: str) -> str:
    adapter = ChatAdapter()
    await adapter.create_all(sessions)
    return _send(adapter.tools, question)  # PC005: 17


async def ask_two_levels_down(sessions: list[ClientSession], question: str) -> str:
    adapter = ChatAdapterChild()
    tools = await adapter.create_all(sessions)
    return _send(tools, question)  # PC005: 17


async def ask_local(sessions: list[ClientSession], question: str) -> str:
    tools = await LocalAdapter().create_all(sessions)
    return _send(tools, question)  # PC005: 17


async def ask_sorted_base(sessions: list[ClientSession], question: str) -> str:
    tools = await SortedChatAdapter().create_all(sessions)
    return _send(tools, question)


async def ask_own_override(sessions: list[ClientSession], question: str) -> str:
    tools = await ResortingChatAdapter().create_all(sessions)
    return _send(tools, question)
