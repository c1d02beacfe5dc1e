import os


class Config:
    def __init__(self):
        self.agent_role = os.environ.get("AGENT_ROLE", "You are a careful research assistant.")
        self.model = "gpt-4o"


class PlainConfig:
    def __init__(self):
        self.agent_role = "You are a careful research assistant."
        self.model = "gpt-4o"
