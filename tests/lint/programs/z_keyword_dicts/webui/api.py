"""The web UI's own API client: its ``list_tools()`` reads the server's tool settings, in the
order the server keeps them; it is not MCP's."""

import httpx


class ApiRequest:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def list_tools(self) -> dict:
        return httpx.get(f"{self.base_url}/tools").json()
