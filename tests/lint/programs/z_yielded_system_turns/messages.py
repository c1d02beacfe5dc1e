"""A chat message of a terminal assistant and its request form (invented)."""

from dataclasses import dataclass


@dataclass
class Message:
    role: str
    content: str


def to_dicts(messages: list[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]
