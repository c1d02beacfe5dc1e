"""The agent turn: call the model, run the tools it asks for, until it answers."""

from __future__ import annotations

from typing import Any

import anthropic

from .llm_service import mark_history_tail, mark_in_turn_tail

client = anthropic.AsyncAnthropic()


async def run_tool(block: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": block.id, "content": f"ran {block.name}"}


async def process_message(history: list[dict], text: str, tools: list[dict]) -> str:
    messages = [*history, {"role": "user", "content": text}]
    mark_history_tail(messages)
    while True:
        mark_in_turn_tail(messages)
        reply = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=2048, tools=tools, messages=messages
        )
        if reply.stop_reason != "tool_use":
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "assistant", "content": reply.content})
        results = [await run_tool(b) for b in reply.content if b.type == "tool_use"]
        messages.append({"role": "user", "content": results})
