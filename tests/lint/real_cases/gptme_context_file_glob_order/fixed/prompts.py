"""The initial messages of a conversation: instructions, then the workspace."""

from __future__ import annotations

from pathlib import Path

from .message import Message
from .workspace import prompt_workspace

BASE = "You are gptme, a terminal assistant. Use the tools to read and change files."


def get_prompt(workspace: Path) -> list[Message]:
    return [Message("system", BASE), *prompt_workspace(workspace)]
