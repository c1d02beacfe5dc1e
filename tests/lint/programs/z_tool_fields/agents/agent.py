# An agent SDK look-alike laid out as the OpenAI Agents SDK is (a package named `agents`):
# `Agent(tools=)` is the sink, and each tool object is sent as its definition only.
from dataclasses import dataclass, field


@dataclass
class Agent:
    name: str
    instructions: str = ""
    tools: list = field(default_factory=list)
