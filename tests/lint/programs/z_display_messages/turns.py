"""A look-alike message class whose objects are sent (invented): each turn's role and content
become the request's messages, so the workspace listing in its system turn is system text."""

from __future__ import annotations

import os
from dataclasses import dataclass

from openai import OpenAI

client = OpenAI()


@dataclass
class Turn:
    role: str
    content: str


def opening(root: str) -> list[Turn]:
    names = [name for _, _, files in os.walk(root) for name in files]
    return [Turn(role="system", content="Workspace files:\n" + "\n".join(names))]  # PC004: 63


def ask(root: str, question: str) -> str:
    turns = [*opening(root), Turn("user", question)]
    reply = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": t.role, "content": t.content} for t in turns]
    )
    return reply.choices[0].message.content or ""
