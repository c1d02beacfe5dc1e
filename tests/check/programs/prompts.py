"""Module two of the clock's path: the time joined into prompt text."""

from clock_source import now_line
from handbook import INSTRUCTIONS


def system_prompt() -> str:
    """The bug: the time at the top of the system prompt."""
    return f"{now_line()}\n{INSTRUCTIONS}"


def stable_system_prompt() -> str:
    return INSTRUCTIONS


def question_with_time(question: str) -> str:
    """The fix: the time in the newest user message, the dynamic tail."""
    return f"({now_line()}) {question}"
