"""The Anthropic chat model wrapper the agent calls each step."""

from __future__ import annotations

import anthropic

from .serializer import Message, serialize_messages


class ChatAnthropic:
    def __init__(self, model: str) -> None:
        self.model = model
        self.client = anthropic.Anthropic()

    def invoke(self, system: str, messages: list[Message]) -> str:
        response = self.client.messages.create(
            model=self.model,
            max_tokens=4096,
            system=system,
            messages=serialize_messages(messages),
        )
        return response.content[0].text
