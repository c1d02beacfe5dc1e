"""Function tools, and toolsets whose tools an MCP server lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp import ClientSession


@dataclass(frozen=True)
class FunctionTool:
    name: str
    description: str
    parameters: dict[str, Any]


class Toolset:
    def __init__(self) -> None:
        self.tools: list[FunctionTool] = []


class ServerToolset(Toolset):
    def __init__(self, session: ClientSession) -> None:
        super().__init__()
        self._session = session

    async def connect(self) -> None:
        listed = await self._session.list_tools()
        self.tools = [
            FunctionTool(t.name, t.description or "", t.inputSchema) for t in listed.tools
        ]
