# The run's input holds an id made per request: it goes in the newest user turn, and reaches
# the instructions only through the agent's method the linter cannot see (an unproven flow);
# a note with the time reaches the instructions through the runner's own code.
import uuid
from datetime import datetime

from kit.run import Runner


async def ask(agent, question: str):
    await Runner.run(agent, f"{question} (request {uuid.uuid4()})")


async def ask_noted(agent, question: str):
    await Runner.run(agent, question, note=f"sent at {datetime.now():%H:%M:%S}")  # PC001: 54
