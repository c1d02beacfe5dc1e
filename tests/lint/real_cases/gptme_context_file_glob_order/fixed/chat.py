"""A chat session: the prompt, then one reply per user message."""

from __future__ import annotations

from pathlib import Path

from .llm import reply
from .message import Message
from .prompts import get_prompt


def chat(workspace: Path, user_messages: list[str]) -> list[Message]:
    log = get_prompt(workspace)
    for text in user_messages:
        log.append(Message("user", text))
        log.append(reply(log))
    return log
