"""A directive that appends the time to the minute to the agent's system prompt before every
model call: the agent's loop then sends that field as the system prompt (found at the store)."""

from datetime import datetime

from crew import Agent


class ClockDirective:
    slug = "clock"

    def step(self, agent: Agent) -> None:
        now = datetime.now().strftime("%A %d %B %Y, %H:%M")
        agent.system_prompt += f"\n\nThe current date and time is: {now}."  # PC001: 8
