# An agent given by the caller may be one that `teach` appended its skills to.
from .agent import Agent


def review(agent: Agent):
    return agent.build()  # PC004: 11
