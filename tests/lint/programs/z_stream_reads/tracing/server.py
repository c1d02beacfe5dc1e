# A client of a local agent server run as a subprocess. Its read size comes from the
# environment, and so does the API key in the environment it starts the server with; what the
# server writes back (the system prompt it used, recorded in a trace) is the server's output,
# made of neither.
import asyncio
import json
import os


class ServerClient:
    def __init__(self, command, env):
        self.command = list(command)
        self.env = dict(env)
        self.chunk_size = int(os.environ.get("AGENT_SERVER_CHUNK_BYTES", "65536"))
        self.process = None
        self.events = []

    async def start(self):
        self.process = await asyncio.create_subprocess_exec(
            *self.command, env=self.env, stdout=asyncio.subprocess.PIPE
        )

    async def read_events(self):
        chunk = await self.process.stdout.read(self.chunk_size)
        for line in chunk.splitlines():
            self.events.append(json.loads(line))
        return self.events
