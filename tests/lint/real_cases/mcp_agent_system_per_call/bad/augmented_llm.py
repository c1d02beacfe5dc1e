"""An LLM wrapper that keeps the conversation and answers one message per call."""

from __future__ import annotations

from openai import OpenAI


class AugmentedLLM:
    def __init__(self, instruction: str, model: str = "gpt-5-mini") -> None:
        self.instruction = instruction
        self.model = model
        self.history: list[dict] = []
        self.client = OpenAI()

    def generate(self, message: str) -> str:
        messages: list[dict] = []
        if self.instruction:
            messages.append({"role": "system", "content": self.instruction})
        messages.extend(self.history)  # PC016: 8
        messages.append({"role": "user", "content": message})
        response = self.client.chat.completions.create(model=self.model, messages=messages)
        reply = response.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": reply})
        # the stored history now starts with this call's system message, and the next call
        # puts another one in front of it
        self.history = messages
        return reply
