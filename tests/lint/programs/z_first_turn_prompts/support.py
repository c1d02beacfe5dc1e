# Registered functions whose own text holds no word of a system prompt: the decorator says it.
from datetime import datetime

from pydantic_ai import Agent

support_agent = Agent()


@support_agent.system_prompt
def greeting() -> str:
    return f"Conversation opened at {datetime.now():%H:%M}."


@support_agent.system_prompt(dynamic=True)
def clock() -> str:
    return f"It is {datetime.now():%H:%M} now."  # PC001: 20


@support_agent.instructions
def house_rules() -> str:
    return f"Quote prices valid at {datetime.now().isoformat()}."  # PC001: 36
