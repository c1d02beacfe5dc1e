# A client of a local SDK server run as a subprocess. Its buffer size comes from the
# environment, and so do the API key and the URL in the environment and the arguments it
# starts the server with; the notifications it keeps are what the server writes back, made of
# none of them.
import asyncio
import json
import os
import subprocess


class SdkClient:
    def __init__(self, command):
        self.command = list(command)
        self.buffer_size = int(os.environ.get("SDK_BUFFER_BYTES", "65536"))
        self.api_key = os.getenv("SDK_API_KEY", "")
        self.notifications = []
        self.process = None

    async def start(self):
        env = {"SDK_API_KEY": self.api_key, "SDK_URL": os.getenv("SDK_URL", "")}
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            "--buffer",
            str(self.buffer_size),
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        return self.process

    async def poll(self):
        line = await self.process.stdout.readline()
        self.notifications.append(json.loads(line))
        return self.notifications

    def version(self):
        env = {"SDK_API_KEY": self.api_key}
        done = subprocess.run([*self.command, "--version"], env=env, capture_output=True, text=True)
        return done.stdout.strip()

    def banner(self):
        server = subprocess.Popen(
            [*self.command, "--banner"],
            env={"SDK_API_KEY": self.api_key},
            stdout=subprocess.PIPE,
            text=True,
        )
        out, _ = server.communicate()
        return out


class Settings:
    def __init__(self):
        self.persona = os.environ.get("AGENT_PERSONA", "a careful assistant")
        self.max_steps = int(os.environ.get("AGENT_MAX_STEPS", "20"))
