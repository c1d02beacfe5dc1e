# The trace of a run: the system messages the server reports, as chat messages (nothing to
# report), and the persona line read from a template filled with the team's name from the
# environment (PC017, info).
import io
import os

from .server import ServerClient

TEAM = os.environ.get("AGENT_TEAM", "research")
PERSONA = io.StringIO(f"You work for the {TEAM} team.\nBe brief.\n")
SERVER_ENV = {"AGENT_API_KEY": os.environ.get("AGENT_API_KEY", "")}


def system_messages(event):
    return [{"role": "system", "content": part} for part in event.get("system", [])]


async def record(command):
    client = ServerClient(command, SERVER_ENV)
    await client.start()
    events = await client.read_events()
    return [system_messages(event) for event in events]


def persona_message():
    return {"role": "system", "content": PERSONA.readline()}  # PC017: 41
