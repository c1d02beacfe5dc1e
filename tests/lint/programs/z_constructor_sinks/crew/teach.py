# Skills listed in filesystem order are appended to the instructions of the agent given.
import os

from .agent import Agent


def teach(agent: Agent, folder: str) -> None:
    agent.learn(", ".join(os.listdir(folder)))
    agent.build()  # PC004: 4
