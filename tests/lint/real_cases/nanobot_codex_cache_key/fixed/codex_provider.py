"""A Responses API provider that routes each conversation to a warm cache."""

import hashlib
import json

from openai import OpenAI


def _prompt_cache_key(messages: list[dict]) -> str:
    raw = json.dumps(messages, ensure_ascii=True, sort_keys=True)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class CodexProvider:
    def __init__(self) -> None:
        self.client = OpenAI()

    def chat(self, instructions: str, messages: list[dict]) -> str:
        response = self.client.responses.create(
            model="gpt-5-codex",
            instructions=instructions,
            input=messages,
            # the opening exchange names the conversation; it does not grow per turn
            prompt_cache_key=_prompt_cache_key(messages[:2]),
        )
        return response.output_text
