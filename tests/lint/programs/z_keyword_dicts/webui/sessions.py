"""An MCP session of the app's own that keeps MCP's ``list_tools()``."""

from mcp import ClientSession


class LoggedSession(ClientSession):
    def log(self, text: str) -> None:
        print(text)
