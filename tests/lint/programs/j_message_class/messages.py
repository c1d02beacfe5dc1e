# A project's own message class: a literal system role is the evidence that it is a prompt,
# where the program turns such messages into a request's (`send`).
from dataclasses import dataclass
from datetime import datetime

from llama_index.core.llms import ChatMessage
from openai import OpenAI


@dataclass
class Message:
    role: str
    content: str


def history(question: str) -> list[Message]:
    return [
        Message(role="system", content=f"Now: {datetime.now():%H:%M}"),  # PC001: 47
        Message(role="user", content=f"[{datetime.now():%H:%M}] {question}"),
    ]


def llama(question: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=f"Today {datetime.now():%H:%M}"), question]  # PC001: 56


def log_line(question: str) -> Message:
    # a role read from data is no evidence
    role = question.split(":")[0]
    return Message(role=role, content=f"{datetime.now()} {question}")


def send(client: OpenAI, question: str) -> str:
    reply = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": m.role, "content": m.content} for m in history(question)],
    )
    return reply.choices[0].message.content or ""
