from .registry import Registry, Tool

BUILTIN = ["search", "fetch"]


async def connect(sessions: list, registry: Registry) -> None:
    for session in sessions:
        listed = await session.list_tools()
        for tool in listed.tools:
            registry.register(Tool(tool.name, tool.description or ""))


def add_builtins(registry: Registry) -> None:
    for name in BUILTIN:
        registry.add_skill(name, f"Use {name} when asked.")
