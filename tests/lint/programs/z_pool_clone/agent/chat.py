from pathlib import Path


class Agent:
    def __init__(self, system_message, tools=None):
        self.system_message = system_message
        self.skills = [path.parent.name for path in Path("skills").rglob("SKILL.md")]
        self.tools = tools

    def clone(self):
        return Agent(system_message=self.system_message, tools=self.tools)
