"""A voice agent session: its own tools plus an MCP server's, then one reply."""

from __future__ import annotations

from mcp import ClientSession

from .llm import chat
from .mcp import MCPToolset
from .tool_context import FunctionTool, ToolContext

LOOKUP = FunctionTool("lookup_order", "Find an order by id.", {"type": "object"})


async def reply(session: ClientSession, messages: list[dict]) -> str:
    toolset = MCPToolset(session)
    await toolset.setup()
    tool_ctx = ToolContext([toolset, LOOKUP])
    return await chat(tool_ctx, messages)  # PC005: 22
