# An agent SDK look-alike: an agent holds its instructions; the runner sends them as the
# request's instructions and the run's input as its first user message.
from dataclasses import dataclass, field


@dataclass
class Agent:
    name: str
    instructions: str = ""
    tools: list = field(default_factory=list)

    def get_system_prompt(self) -> str:
        return self.instructions
