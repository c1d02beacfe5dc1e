"""An adapter base class: each connector's tools, in the order its server lists them."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from mcp import ClientSession

T = TypeVar("T")


class ToolAdapter(Generic[T]):
    def __init__(self) -> None:
        self.tools: list[dict[str, Any]] = []

    def convert(self, tool: Any) -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description}

    async def load_for(self, session: ClientSession) -> list[dict[str, Any]]:
        listed = await session.list_tools()
        return [self.convert(tool) for tool in listed.tools]

    async def create_all(self, sessions: list[ClientSession]) -> list[dict[str, Any]]:
        for session in sessions:
            self.tools.extend(await self.load_for(session))
        return self.tools


class SortingAdapter(ToolAdapter):
    """The same tools, sorted by name."""

    async def create_all(self, sessions: list[ClientSession]) -> list[dict[str, Any]]:
        tools = [tool for s in sessions for tool in await self.load_for(s)]
        return sorted(tools, key=lambda tool: tool["name"])
