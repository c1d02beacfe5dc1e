"""Send the conversation log to the model."""

from __future__ import annotations

from openai import OpenAI

from .message import Message

client = OpenAI()


def reply(log: list[Message], model: str = "gpt-5-mini") -> Message:
    response = client.chat.completions.create(
        model=model,
        messages=[{"role": m.role, "content": m.content} for m in log],
    )
    return Message("assistant", response.choices[0].message.content or "")
