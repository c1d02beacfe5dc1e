"""A terminal chat whose pane shows lines of its own message class, system notes included
(invented): the notes are only rendered to the terminal; the model gets the history of plain
dicts. The session id and the workspace listing in the notes reach no request."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from openai import OpenAI

client = OpenAI()


@dataclass
class ChatMessage:
    role: str
    content: str
    shown_at: datetime = field(default_factory=datetime.now)


class Console:
    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self.history: list[dict[str, str]] = []
        self.session_id = ""

    def new_session(self) -> None:
        self.session_id = uuid.uuid4().hex
        self.history.clear()
        self.messages.append(ChatMessage(role="system", content=f"New session: {self.session_id}"))

    def list_files(self, root: str) -> None:
        names = [name for _, _, files in os.walk(root) for name in files]
        self.messages.append(ChatMessage("system", "Workspace files:\n" + "\n".join(names)))

    def render(self) -> str:
        lines = []
        for message in self.messages:
            lines.append(f"{message.role}> {message.content}")
        return "\n".join(lines)

    def ask(self, question: str) -> str:
        self.messages.append(ChatMessage(role="user", content=question))
        self.history.append({"role": "user", "content": question})
        reply = client.chat.completions.create(model="gpt-4o", messages=self.history)
        answer = reply.choices[0].message.content or ""
        self.history.append({"role": "assistant", "content": answer})
        self.messages.append(ChatMessage(role="assistant", content=answer))
        print(self.render())
        return answer
