"""A toolset backed by an MCP server: its tools are whatever the server lists."""

from __future__ import annotations

from mcp import ClientSession

from .tool_context import FunctionTool, Toolset


class MCPToolset(Toolset):
    def __init__(self, session: ClientSession) -> None:
        super().__init__()
        self._session = session

    async def setup(self) -> None:
        listed = await self._session.list_tools()
        self.tools = [
            FunctionTool(t.name, t.description or "", t.inputSchema) for t in listed.tools
        ]
