"""The chat loop: every tool result is appended to the log, and the whole log is sent on each
turn; beside it, messages rebuilt with the time for every request (invented)."""

import time
from datetime import datetime

from openai import OpenAI

from .messages import Message, to_dicts
from .tools import COMMANDS, HOOKS, TOOLS, prompt_sections

client = OpenAI()


def opening(history: list[Message]):
    # the time first, then the history: the head of a request, built again for each one
    yield Message("system", f"Now: {datetime.now()}")  # PC001: 36
    for m in history:
        if m.content:
            yield m


def opening_whole(history: list[Message]):
    yield Message("system", f"Now: {time.time()}")  # PC001: 36
    yield from history


def stamp() -> Message:
    return Message("system", f"Stamped {time.time()}")  # PC001: 40


def stamps():
    yield stamp()


def banner() -> Message:
    return Message("system", f"Banner of {time.time()}")  # PC001: 42


def banners():
    yield banner()


class Chat:
    def __init__(self) -> None:
        self.log: list[Message] = []
        self.hooks = [banner]

    def _send(self, messages: list[Message]) -> str:
        out = client.chat.completions.create(model="gpt-4o", messages=to_dicts(messages))
        return out.choices[0].message.content or ""

    def step(self, question: str, cmd: str) -> None:
        self.log.append(Message("user", question))
        self.log.append(Message("assistant", self._send(self.log)))
        for tool in TOOLS:
            for msg in tool.execute(cmd):
                self.log.append(msg)
        for hook in HOOKS:
            for msg in hook(5):
                self.log.append(msg)
        for msg in COMMANDS["checks"]("queued,done"):
            self.log.append(msg)
        for msg in stamps():
            self.log.append(msg)
        for msg in banners():
            self.log.append(msg)

    def ask(self, question: str) -> str:
        # rebuilt with the time on every request, at the front
        messages = [Message("system", f"now {time.time()}"), *self.log]  # PC001: 45
        return self._send([*messages, Message("user", question)])

    def ask_sections(self, question: str) -> str:
        return self._send([*prompt_sections(), *self.log, Message("user", question)])

    def ask_opened(self, question: str) -> str:
        return self._send([*opening(self.log), *opening_whole(self.log), stamp()])
