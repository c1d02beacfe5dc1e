"""Look-alikes: the time stored into fields of the agent that its loop only compares (the
timer), only logs, or sends as the newest user turn; into a field no method of it reads; and
into the system prompt of an agent built here and never run (only its text is returned)."""

import time
from datetime import datetime

from crew import Agent


class Watchdog:
    def step(self, agent: Agent) -> None:
        agent.started = time.time()
        agent.last_seen = datetime.now().isoformat()
        agent.question = f"({datetime.now():%H:%M}) {agent.question}"
        agent.checked_at = datetime.now().isoformat()


def draft() -> str:
    agent = Agent([])
    agent.system_prompt += f"\nDrafted at {datetime.now():%H:%M}."
    return agent.system_prompt.upper()
