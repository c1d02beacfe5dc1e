"""The chat model, bound to the built-in and MCP tools."""

from contextlib import AsyncExitStack

from langchain_anthropic import ChatAnthropic

from .mcp_tools import load_tools_from_config


async def make_model(config: dict, stack: AsyncExitStack):
    mcp_tools = await load_tools_from_config(config, stack)
    model = ChatAnthropic(model="claude-sonnet-4-6")
    return model.bind_tools(mcp_tools)
