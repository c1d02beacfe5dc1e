from agent.chat import Agent


class AgentPool:
    def __init__(self, base_agent: Agent):
        self.base_agent = base_agent
        self.agents = []
        self._fill()

    def _fill(self):
        self.agents.append(self._fresh())

    def _fresh(self) -> Agent:
        return self.base_agent.clone()
