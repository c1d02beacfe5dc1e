"""Connect every configured MCP server and collect its tools."""

from contextlib import AsyncExitStack

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools


async def load_tools_from_config(config: dict, stack: AsyncExitStack) -> list[BaseTool]:
    client = MultiServerMCPClient(connections=config["servers"])
    all_tools: list[BaseTool] = []
    for server_name in config["servers"]:
        session = await stack.enter_async_context(client.session(server_name))
        tools = await load_mcp_tools(session, server_name=server_name, tool_name_prefix=True)
        all_tools.extend(tools)
    # list_tools() order is not guaranteed; the tools block must not move between turns
    all_tools.sort(key=lambda t: t.name)
    return all_tools
