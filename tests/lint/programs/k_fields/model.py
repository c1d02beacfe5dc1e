# Objects keep their fields apart: a message's created_at is not its content.
from dataclasses import dataclass, field
from datetime import datetime


def now_text() -> str:
    return datetime.now().isoformat()


@dataclass
class Note:
    text: str
    created_at: str = field(default_factory=now_text)


class State:
    def __init__(self, summary: str, notes: list[Note]):
        self.summary = summary
        self.notes = notes


class Assistant:
    def __init__(self, rules: str, state: State):
        self.rules = rules
        self.state = state

    def system_text(self) -> str:
        return f"{self.rules}\n{self.state.summary}"

    def stamped_text(self) -> str:
        return f"{self.rules} (as of {self.state.summary})"
