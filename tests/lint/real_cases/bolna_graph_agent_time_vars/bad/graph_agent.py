"""A graph agent: each node has its own prompt; every turn rebuilds the messages."""

from __future__ import annotations

from typing import Any

from openai import AsyncOpenAI

from .utils import enrich_context_with_time_variables, update_prompt_with_context


class GraphAgent:
    def __init__(self, node_prompts: dict[str, str], context_data: dict[str, Any]) -> None:
        self.node_prompts = node_prompts
        self.current_node_id = "start"
        self.context_data = context_data
        self.client = AsyncOpenAI()

    def _build_messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prompt = self.node_prompts[self.current_node_id]
        timezone = self.context_data.get("recipient_data", {}).get("timezone")
        if timezone:
            enrich_context_with_time_variables(self.context_data, timezone)
        prompt = update_prompt_with_context(prompt, self.context_data)
        conversation = [msg for msg in history if msg.get("role") != "system"]
        return [{"role": "system", "content": prompt}] + conversation  # PC001: 46

    async def generate(self, history: list[dict[str, Any]]) -> str:
        response = await self.client.chat.completions.create(
            model="gpt-5-mini",
            messages=self._build_messages(history),
        )
        return response.choices[0].message.content or ""
