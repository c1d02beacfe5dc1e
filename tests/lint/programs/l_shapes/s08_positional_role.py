# Shape 8: a message class with its role passed positionally, whose messages are sent; a user
# message stays silent.
from dataclasses import dataclass
from datetime import datetime

from openai import OpenAI


@dataclass
class Message:
    role: str
    content: str


def opening(question: str) -> list[Message]:
    now = datetime.now()
    return [
        Message("system", f"Now: {now:%Y-%m-%d %H:%M}"),  # PC001: 34
        Message("user", f"[{now:%H:%M}] {question}"),
    ]


def ask(client: OpenAI, question: str) -> str:
    reply = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": m.role, "content": m.content} for m in opening(question)],
    )
    return reply.choices[0].message.content or ""
