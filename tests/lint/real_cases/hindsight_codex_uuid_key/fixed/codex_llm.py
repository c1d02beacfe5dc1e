"""Codex-backed LLM client: one payload shape shared by plain calls and tool calls."""

import functools
import hashlib

from openai import AsyncOpenAI


class CodexLLM:
    def __init__(self, account_id: str, model: str) -> None:
        self.account_id = account_id
        self.model = model
        self.client = AsyncOpenAI()

    @functools.cached_property
    def _prompt_cache_key(self) -> str:
        seed = f"{self.account_id}:{self.model}"
        return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]

    def _payload(self, instructions: str, items: list[dict]) -> dict:
        return {
            "model": self.model,
            "instructions": instructions,
            "input": items,
            "store": False,
            "prompt_cache_key": self._prompt_cache_key,
        }

    async def call(self, instructions: str, items: list[dict]) -> str:
        payload = self._payload(instructions, items)
        response = await self.client.responses.create(**payload)
        return response.output_text
