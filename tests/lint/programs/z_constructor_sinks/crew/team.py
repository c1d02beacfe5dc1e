# Agents built here: each constructor sends the instructions of a new agent, which hold only the
# class's text (nothing was stored into this agent yet), whatever other modules store into the
# agents they are given. Each constructor call records the sink its warm-up reaches, whose text
# is that same call.
from .agent import Agent


def make_checker() -> Agent:
    return Agent(name="checker")


def make_pair() -> list[Agent]:
    first = Agent(name="first")
    first.build()
    return [first, Agent(name="second")]
