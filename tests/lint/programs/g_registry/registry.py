# g) tools from a registry dict filled as servers connect, returned in insertion order; one
# server's own registry (its tools in the order it registers them) is not shown to change
import anthropic

client = anthropic.Anthropic()


class ToolRegistry:
    def __init__(self):
        self.tools = {}

    async def connect_all(self, sessions):
        for session in sessions:
            listed = await session.list_tools()
            for tool in listed.tools:
                self.tools[tool.name] = {"name": tool.name, "input_schema": tool.inputSchema}

    def all_tools(self):
        return list(self.tools.values())

    def sorted_tools(self):
        return [self.tools[name] for name in sorted(self.tools)]


class ServerTools:
    def __init__(self):
        self.tools = {}

    async def connect(self, session):
        listed = await session.list_tools()
        for tool in listed.tools:
            self.tools[tool.name] = {"name": tool.name, "input_schema": tool.inputSchema}

    def all_tools(self):
        return list(self.tools.values())


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


async def ask_one_server(server: ServerTools, question: str):
    return client.messages.create(
        model="m",
        max_tokens=10,
        tools=server.all_tools(),  # one server's list: an unproven flow (--explain)
        messages=[{"role": "user", "content": question}],
    )
