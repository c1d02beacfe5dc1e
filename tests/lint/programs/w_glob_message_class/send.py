"""The messages sent to the model: each one's role and content, in order."""

from __future__ import annotations

from openai import OpenAI

from .message import Message


def send(client: OpenAI, messages: list[Message]) -> str:
    reply = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": m.role, "content": m.content} for m in messages],
    )
    return reply.choices[0].message.content or ""
