# A second agent SDK look-alike, laid out as pydantic-ai is: `Agent(tools=)` is the sink.


class Agent:
    def __init__(self, model: str, instructions: str = "", tools: list | None = None):
        self.model = model
        self.instructions = instructions
        self.tools = list(tools or [])
