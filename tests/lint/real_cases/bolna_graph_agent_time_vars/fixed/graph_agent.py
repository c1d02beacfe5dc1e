"""A graph agent: each node has its own prompt; every turn rebuilds the messages."""

from __future__ import annotations

from typing import Any

from openai import AsyncOpenAI

from .utils import enrich_context_with_time_variables, update_prompt_with_context

_TIME_VAR_KEYS = ("current_date", "current_time", "current_hour", "current_weekday")


class GraphAgent:
    def __init__(self, node_prompts: dict[str, str], context_data: dict[str, Any]) -> None:
        self.node_prompts = node_prompts
        self.current_node_id = "start"
        self.context_data = context_data
        self.client = AsyncOpenAI()
        self._frozen_time_vars: dict[str, Any] | None = None

    def _prompt_context(self) -> dict[str, Any]:
        """The context for the prompt, with the time frozen at the start of the call."""
        recipient = self.context_data.get("recipient_data", {})
        if self._frozen_time_vars is None:
            timezone = recipient.get("timezone")
            if timezone:
                enrich_context_with_time_variables(self.context_data, timezone)
                recipient = self.context_data["recipient_data"]
            self._frozen_time_vars = {k: recipient[k] for k in _TIME_VAR_KEYS if k in recipient}
        return {**self.context_data, "recipient_data": {**recipient, **self._frozen_time_vars}}

    def _build_messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prompt = update_prompt_with_context(
            self.node_prompts[self.current_node_id], self._prompt_context()
        )
        conversation = [msg for msg in history if msg.get("role") != "system"]
        return [{"role": "system", "content": prompt}] + conversation

    async def generate(self, history: list[dict[str, Any]]) -> str:
        response = await self.client.chat.completions.create(
            model="gpt-5-mini",
            messages=self._build_messages(history),
        )
        return response.choices[0].message.content or ""
