"""A chat message of a solver's state (invented)."""

from dataclasses import dataclass, field


@dataclass
class Message:
    role: str
    content: str


@dataclass
class State:
    messages: list[Message] = field(default_factory=list)
