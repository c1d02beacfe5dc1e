"""The date, not the time: appended before every call it changes once a day (info); written
once where the setup is built it is computed once (not reported)."""

from datetime import date

from crew.agent import Agent


class DateDirective:
    def step(self, agent: Agent) -> None:
        agent.system_prompt += f"\nToday is {date.today().isoformat()}."  # PC001: 8


class Setup:
    def __init__(self, agent: Agent) -> None:
        agent.system_prompt = f"{agent.system_prompt}\nToday is {date.today():%Y-%m-%d}."
        self.agent = agent
