# A value drawn once per game and put into each agent's system prompt when the agents are built:
# every round then sends the same prompt, so the value is the agents' (like an id naming an
# agent's folder). Drawn each round, with the agents built again, or drawn by a call that
# builds an agent and runs it at once, it is new for every request.
import random

from agentkit import Agent


class Game:
    def __init__(self, rounds: int):
        self.rounds = rounds

    def play(self, task: str) -> None:
        values = {name: random.randint(0, 50) for name in ("a", "b")}
        agents = self._build(values, task)
        for _ in range(self.rounds):
            for name in values:
                agents[name].run(task)

    def _build(self, values: dict, task: str) -> dict:
        agents = {}
        for name in values:
            agents[name] = Agent(
                agent_name=name, system_prompt=f"Your value is {values[name]}. Task: {task}"
            )
        return agents

    def play_rebuilt(self, task: str) -> None:
        # the look-alike: a value drawn and the agents built again every round
        for _ in range(self.rounds):
            values = {"a": random.randint(0, 50)}
            agents = self._build(values, task)  # PC002: 33
            agents["a"].run(task)

    def ask(self, task: str):
        # the look-alike: drawn by the call that builds the agent and runs it once
        values = {"a": random.randint(0, 50)}
        agents = self._build(values, task)  # PC002: 29
        return agents["a"].run(task)
