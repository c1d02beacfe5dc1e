# pydantic-ai runs a function registered with @agent.system_prompt when a conversation starts
# (no message history yet) and keeps its text in the history; dynamic=True runs it again on
# every run, and @agent.instructions are never kept in the history.
from datetime import datetime, timezone

from pydantic_ai import Agent, RunContext

chat_agent = Agent()


@chat_agent.system_prompt
def chat_system_prompt() -> str:
    now_utc = datetime.now(timezone.utc)
    return f"The current date and time is {datetime.now()} ({now_utc:%Z})."


@chat_agent.system_prompt(dynamic=False)
def kept_system_prompt(ctx: RunContext[str]) -> str:
    return f"{ctx.deps}, started at {datetime.now()}."


@chat_agent.system_prompt(dynamic=True)
def every_run_system_prompt() -> str:
    return f"The current date and time is {datetime.now()}."  # PC001: 43


@chat_agent.instructions
def instructions_system_prompt() -> str:
    return f"Answer as of {datetime.now()}."  # PC001: 27
