"""Connect to the configured MCP servers and register what they offer."""

from __future__ import annotations

from mcp import ClientSession

from .registry import Tool, ToolRegistry


async def connect_servers(sessions: dict[str, ClientSession], registry: ToolRegistry) -> None:
    for server, session in sessions.items():
        await session.initialize()
        listed = await session.list_tools()
        for tool_def in listed.tools:
            name = f"mcp_{server}_{tool_def.name}"
            registry.register(Tool(name, tool_def.description or "", tool_def.inputSchema))
