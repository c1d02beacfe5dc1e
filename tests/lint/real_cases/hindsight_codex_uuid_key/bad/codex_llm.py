"""Codex-backed LLM client: one payload shape shared by plain calls and tool calls."""

import uuid

from openai import AsyncOpenAI


class CodexLLM:
    def __init__(self, account_id: str, model: str) -> None:
        self.account_id = account_id
        self.model = model
        self.client = AsyncOpenAI()

    def _payload(self, instructions: str, items: list[dict]) -> dict:
        return {
            "model": self.model,
            "instructions": instructions,
            "input": items,
            "store": False,
            "prompt_cache_key": str(uuid.uuid4()),
        }

    async def call(self, instructions: str, items: list[dict]) -> str:
        payload = self._payload(instructions, items)
        response = await self.client.responses.create(**payload)  # PC013: 56
        return response.output_text
