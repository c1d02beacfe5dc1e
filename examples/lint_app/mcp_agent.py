"""An MCP agent written the naive way: unsorted MCP tools, a sliding window, a breakpoint on
every message, a model switch per turn. ``promptcache lint`` reports each pattern."""

from __future__ import annotations

from typing import Any

import anthropic

client = anthropic.AsyncAnthropic()
SYSTEM = "You are a careful research agent. Use the tools; cite every source you rely on."


class Agent:
    """One conversation with the tools of several MCP server sessions."""

    def __init__(self, sessions: list[Any]) -> None:
        self.sessions = sessions
        self.history: list[dict[str, Any]] = []

    async def tools(self) -> list[dict[str, Any]]:
        listed = [t for s in self.sessions for t in (await s.list_tools()).tools]
        return [
            {"name": t.name, "description": t.description, "input_schema": t.inputSchema}
            for t in listed
        ]

    async def ask(self, question: str) -> Any:
        self.history.append({"role": "user", "content": [{"type": "text", "text": question}]})
        if len(self.history) > 20:
            self.history = self.history[-20:]
        for message in self.history:
            message["content"][-1]["cache_control"] = {"type": "ephemeral"}
        model = "claude-haiku-4-5" if len(question) < 100 else "claude-sonnet-4-5"
        tools = await self.tools()
        reply = await client.messages.create(
            model=model,
            max_tokens=1024,
            system=SYSTEM,
            tools=tools,
            messages=self.history,
        )
        self.history.append({"role": "assistant", "content": reply.content})
        return reply
