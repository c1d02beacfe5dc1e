"""The conversation agent: one chat log turn against an OpenAI-compatible local server."""

from __future__ import annotations

from typing import Any

import openai

from .host import ChatLog, Intent

MAX_TOOL_ITERATIONS = 10


def _format_tool(tool: Intent) -> dict[str, Any]:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.slots}
    return {"type": "function", "function": function}


class LocalAiEntity:
    def __init__(self, client: openai.AsyncOpenAI, model: str) -> None:
        self.client = client
        self.model = model

    async def async_handle_chat_log(self, chat_log: ChatLog) -> None:
        model_args: dict[str, Any] = {"model": self.model, "temperature": 0.6}
        tools: list[dict[str, Any]] | None = None
        if chat_log.llm_api:
            tools = [_format_tool(tool) for tool in chat_log.llm_api.tools]
        model_args["messages"] = list(chat_log.content)
        if tools:
            model_args["tools"] = tools
        await self._run_agent_loop(model_args, chat_log)

    async def _run_agent_loop(self, model_args: dict[str, Any], chat_log: ChatLog) -> None:
        for _ in range(MAX_TOOL_ITERATIONS):
            result = await self.client.chat.completions.create(**model_args)  # PC005: 65
            message = result.choices[0].message
            chat_log.content.append({"role": "assistant", "content": message.content or ""})
            if not message.tool_calls:
                return
