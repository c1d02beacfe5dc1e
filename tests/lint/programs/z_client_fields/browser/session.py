# A browser session (a pydantic model) that holds no client until it connects: a private
# attribute declared with `PrivateAttr(default=None)` and set back to `None` on close. What the
# browser answers through the client (the window's size) is not the client's timeout, nor is
# what a method of the client returns without reading it; what its method returns from its
# timeout is.
from pydantic import BaseModel, PrivateAttr

from .rpc import TimedClient


class BrowserSession(BaseModel):
    url: str
    width: int = 1280
    height: int = 800
    _client: TimedClient | None = PrivateAttr(default=None)

    async def close(self):
        self._client = None

    async def connect(self):
        self._client = TimedClient(self.url)
        bounds = await self._client.send.Browser.getWindowBounds(params={"windowId": 1})
        self.width = bounds["bounds"]["width"]
        self.height = bounds["bounds"]["height"]

    async def ensure_client(self):
        if self._client is not None:
            return self._client
        self._client = TimedClient(self.url)
        return self._client

    async def page_title(self):
        client = await self.ensure_client()
        answer = await client.send.Runtime.evaluate(params={"expression": "document.title"})
        return answer["result"]["value"]

    def computer_tool(self):
        return {
            "type": "computer_use_preview",
            "display_width": self.width,
            "display_height": self.height,
            "environment": "browser",
        }

    def timeout_note(self):
        return f"You drive a browser. {self._client.describe()}"

    def product_note(self):
        return f"You drive {self._client.product()}."
