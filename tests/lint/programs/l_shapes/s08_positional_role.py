# Shape 8: a message class with its role passed positionally; a user message stays silent.
from dataclasses import dataclass
from datetime import datetime


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
