"""One reply with the agent's own tool plus a server's, through three catalogs: one keeps the
server's order, one sorts its dict once filled, one emits its dict through sorted()."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession
from openai import AsyncOpenAI

from .catalog import Catalog, EmitSortedCatalog, SortedCatalog
from .toolsets import FunctionTool, ServerToolset

client = AsyncOpenAI()
LOOKUP = FunctionTool("lookup_order", "Find an order by id.", {"type": "object"})


async def _ask(tools: list[dict[str, Any]], messages: list[dict]) -> str:
    response = await client.chat.completions.create(
        model="gpt-5-mini", messages=messages, tools=tools
    )
    return response.choices[0].message.content or ""


async def ask(catalog: Catalog, messages: list[dict]) -> str:
    return await _ask(catalog.schemas(), messages)


async def ask_sorted(catalog: SortedCatalog, messages: list[dict]) -> str:
    return await _ask(catalog.schemas(), messages)


async def ask_emit_sorted(catalog: EmitSortedCatalog, messages: list[dict]) -> str:
    return await _ask(catalog.schemas(), messages)


async def reply(session: ClientSession, messages: list[dict]) -> str:
    toolset = ServerToolset(session)
    await toolset.connect()
    return await ask(Catalog([toolset, LOOKUP]), messages)  # PC005: 21


async def reply_sorted(session: ClientSession, messages: list[dict]) -> str:
    toolset = ServerToolset(session)
    await toolset.connect()
    return await ask_sorted(SortedCatalog([toolset, LOOKUP]), messages)


async def reply_emit_sorted(session: ClientSession, messages: list[dict]) -> str:
    toolset = ServerToolset(session)
    await toolset.connect()
    return await ask_emit_sorted(EmitSortedCatalog([toolset, LOOKUP]), messages)
