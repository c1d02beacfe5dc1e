# g) tools from a registry dict filled as servers connect, returned in insertion order
import anthropic

client = anthropic.Anthropic()


class ToolRegistry:
    def __init__(self):
        self.tools = {}

    async def connect(self, session):
        listed = await session.list_tools()
        for tool in listed.tools:
            self.tools[tool.name] = {"name": tool.name, "input_schema": tool.inputSchema}

    def all_tools(self):
        return list(self.tools.values())

    def sorted_tools(self):
        return [self.tools[name] for name in sorted(self.tools)]


async def ask(registry: ToolRegistry, question: str):
    return client.messages.create(
        model="m",
        max_tokens=10,
        tools=registry.all_tools(),  # PC005: 14
        messages=[{"role": "user", "content": question}],
    )


async def ask_sorted(registry: ToolRegistry, question: str):
    return client.messages.create(
        model="m",
        max_tokens=10,
        tools=registry.sorted_tools(),
        messages=[{"role": "user", "content": question}],
    )
