"""The MCP agent, fixed: tools sorted by name, an append-only history, one automatic
breakpoint that follows the conversation, and one model per conversation."""

from __future__ import annotations

from typing import Any

import anthropic

client = anthropic.AsyncAnthropic()
SYSTEM = "You are a careful research agent. Use the tools; cite every source you rely on."


class Agent:
    """One conversation with the tools of several MCP server sessions, on one model."""

    def __init__(self, sessions: list[Any], model: str = "claude-sonnet-4-5") -> None:
        self.sessions = sessions
        self.model = model
        self.history: list[dict[str, Any]] = []

    async def tools(self) -> list[dict[str, Any]]:
        listed = [t for s in self.sessions for t in (await s.list_tools()).tools]
        return [
            {"name": t.name, "description": t.description, "input_schema": t.inputSchema}
            for t in sorted(listed, key=lambda tool: tool.name)
        ]

    async def ask(self, question: str) -> Any:
        self.history.append({"role": "user", "content": [{"type": "text", "text": question}]})
        reply = await client.messages.create(
            model=self.model,
            max_tokens=1024,
            system=SYSTEM,
            tools=await self.tools(),
            messages=self.history,
            cache_control={"type": "ephemeral"},
        )
        self.history.append({"role": "assistant", "content": reply.content})
        return reply
