# The agent: system messages made of what the SDK server sent back, read with getattr of a
# constant name (nothing to report: not the client's buffer size, key or URL), of the server's
# version and banner (nothing to report: a subprocess's output is not its environment or
# arguments), and the persona read with getattr from settings filled from the environment
# (PC017, info, with the environment read as its origin).
from .client import SdkClient, Settings
from .history import History


class Agent:
    def __init__(self, command):
        self.settings = Settings()
        self._sdk = None
        self.command = command

    async def _ensure_sdk(self):
        if self._sdk is None:
            self._sdk = SdkClient(self.command)
            await self._sdk.start()
        return self._sdk

    async def notification_messages(self):
        sdk = await self._ensure_sdk()
        await sdk.poll()
        events = getattr(sdk, "notifications", [])
        return [{"role": "system", "content": str(event)} for event in events]

    async def process_messages(self):
        sdk = await self._ensure_sdk()
        process = await sdk.start()
        return [{"role": "system", "content": f"server pid {getattr(process, 'pid', 0)}"}]

    async def version_message(self):
        sdk = await self._ensure_sdk()
        return {"role": "system", "content": f"SDK {sdk.version()}\n{sdk.banner()}"}

    def persona_message(self):
        persona = getattr(self.settings, "persona", "an assistant")
        return {"role": "system", "content": f"You are {persona}."}  # PC017: 56

    async def history_messages(self):
        sdk = await self._ensure_sdk()
        history = History()
        history.keep(sdk, self.settings)
        return [*history.messages(), history.persona_message()]  # PC017: 37
