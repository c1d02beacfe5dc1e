"""The Anthropic model the agent calls with its whole context."""

from __future__ import annotations

import anthropic

from .lmm import Turn, turn_as_message


class AnthropicLMM:
    def __init__(self, model: str) -> None:
        self.model = model
        self.client = anthropic.AsyncAnthropic()

    async def complete(self, instruction: str, context: list[Turn]) -> str:
        response = await self.client.messages.create(
            model=self.model,
            max_tokens=2048,
            system=instruction,
            messages=[turn_as_message(turn) for turn in context],
        )
        return response.content[0].text
