"""Provider adapters: each inherits create_all from its base class in another module."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession

from .base import SortingAdapter, ToolAdapter


class ChatAdapter(ToolAdapter[dict[str, Any]]):
    def convert(self, tool: Any) -> dict[str, Any]:
        return {"type": "function", "function": {"name": tool.name}}


class SortedChatAdapter(SortingAdapter):
    def convert(self, tool: Any) -> dict[str, Any]:
        return {"type": "function", "function": {"name": tool.name}}


class ChatAdapterChild(ChatAdapter):
    """Two levels down, still the unsorted create_all of ToolAdapter."""


class ResortingChatAdapter(ChatAdapter):
    """Its own create_all sorts: it wins over the inherited one."""

    async def create_all(self, sessions: list[ClientSession]) -> list[dict[str, Any]]:
        tools = [tool for s in sessions for tool in await self.load_for(s)]
        return sorted(tools, key=lambda tool: tool["function"]["name"])
