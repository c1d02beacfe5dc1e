# Tool objects that keep machine-specific or per-request state in what runs them: none of it
# is in the definition the SDK sends.
import os
import time
import uuid
from pathlib import Path

from agents import Agent, FunctionTool, LocalShellTool, ShellTool


class Executor:
    """Runs the commands the model asks for, in a working folder of this machine."""

    def __init__(self, cwd: Path | None = None):
        self.cwd = Path(cwd or Path.cwd())
        self.home = os.path.expanduser("~")

    async def __call__(self, request):
        return f"ran {request} in {self.cwd}"


class Invoker:
    def __init__(self, started: float, run_id: str):
        self.started = started
        self.run_id = run_id

    async def __call__(self, ctx, args: str) -> str:
        return f"{self.run_id}: {args}"


def shell_agent() -> Agent:
    return Agent(
        name="shell",
        instructions="Run what the user asks.",
        tools=[ShellTool(executor=Executor(), needs_approval=True)],
    )


def local_shell_agent() -> Agent:
    tools = [LocalShellTool(executor=Executor())]
    return Agent(name="local", instructions="Run it here.", tools=tools)


def lookup_agent(question: str) -> Agent:
    invoker = Invoker(time.time(), uuid.uuid4().hex)
    lookup = FunctionTool(
        name="lookup",
        description="Look a word up in the dictionary.",
        params_json_schema={"type": "object", "properties": {"word": {"type": "string"}}},
        on_invoke_tool=invoker,
        timeout_seconds=time.time() % 60,
    )
    return Agent(name="lookup", instructions="Answer with the dictionary.", tools=[lookup])


def make_agent(tools: list) -> Agent:
    return Agent(name="made", instructions="Use the tools.", tools=tools)


def shell_agent_through_helper() -> Agent:
    return make_agent([ShellTool(executor=Executor())])


#: the environment is sent: the working folder of this machine reaches the tools
HERE = {"type": "local", "cwd": str(Path.cwd())}


def shell_in_an_environment() -> Agent:
    return Agent(
        name="env",
        instructions="Run it.",
        tools=[ShellTool(executor=Executor(), environment=HERE)],  # PC017: 15
    )


def appended_shell_agent() -> Agent:
    tools = []
    tools.append(ShellTool(executor=Executor()))
    tools.append(LocalShellTool(executor=Executor()))
    return Agent(name="appended", instructions="Run it.", tools=tools)
