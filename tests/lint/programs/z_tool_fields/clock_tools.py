# Function tools whose definition (name, description) holds a per-request value: sent with
# every request, so the cached prefix changes.
import uuid
from datetime import datetime

from agents import Agent, FunctionTool


async def answer(ctx, args: str) -> str:
    return args


def dated_agent() -> Agent:
    tool = FunctionTool(
        name="schedule",
        description=f"Book a slot. It is now {datetime.now():%H:%M}.",
        params_json_schema={"type": "object"},
        on_invoke_tool=answer,
    )
    return Agent(name="dated", instructions="Book slots.", tools=[tool])  # PC001: 66


def named_agent() -> Agent:
    return Agent(
        name="named",
        instructions="Use the tool.",
        tools=[
            FunctionTool(  # PC002: 12
                name=f"tool_{uuid.uuid4().hex[:8]}",
                description="Answer.",
                params_json_schema={"type": "object"},
                on_invoke_tool=answer,
            )
        ],
    )


def helper_agent() -> Agent:
    # handed to a helper whose parameter reaches `Agent(tools=)`
    from shell_app import make_agent

    tool = FunctionTool(f"at_{datetime.now():%H%M%S}", "Answer.", {}, answer)
    return make_agent([tool])  # PC001: 22


def mixed_agent() -> Agent:
    # the shell tool's executor is not sent, the clock tool's description is
    from agents import ShellTool
    from shell_app import Executor

    tools = []
    tools.append(ShellTool(executor=Executor()))
    tools.append(
        FunctionTool(
            name="clock",
            description=f"Tell the time: {datetime.now().isoformat()}",
            params_json_schema={},
            on_invoke_tool=answer,
        )
    )
    return Agent(name="mixed", instructions="Answer.", tools=tools)  # PC001: 61
