# A browser's RPC client: its request timeout comes from the environment, read once at import.
# Its base class belongs to a library, so the linter cannot see `send` or anything it returns.
import os

from devtools_ws import DevToolsClient

DEFAULT_TIMEOUT = float(os.getenv("BROWSER_RPC_TIMEOUT", "30"))


class TimedClient(DevToolsClient):
    def __init__(self, url, timeout=None):
        super().__init__(url)
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout

    def describe(self):
        return f"Each browser action times out after {self.timeout:.0f} s."

    def product(self):
        return "Chromium"
