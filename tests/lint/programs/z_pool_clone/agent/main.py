from pathlib import Path

from agent.chat import Agent
from agent.pool import AgentPool


def plain_pool():
    # the agent's skills lie in a field its clone never sends
    return AgentPool(Agent("You are a helpful assistant."))


def pool_with_skills_in_prompt():
    skills = ", ".join(path.parent.name for path in Path("skills").rglob("SKILL.md"))
    return AgentPool(Agent(f"You know these skills: {skills}."))  # PC004: 21


def direct_clone():
    skills = ", ".join(path.parent.name for path in Path("skills").rglob("SKILL.md"))
    return Agent(f"You know these skills: {skills}.").clone()  # PC004: 11
