"""Helpers that loop over what they are given: a formatter that gathers the system messages,
and two that list a name-keyed tool dict, in its order or sorted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Message:
    role: str
    content: str


def system_text(messages: list[Message]) -> str:
    text = ""
    for message in messages:
        if message.role == "system":
            text += message.content + "\n"
    return text.strip()


def in_order(by_name: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    listed = []
    for name in by_name:
        listed.append(by_name[name])
    return listed


def by_name_sorted(by_name: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    listed = []
    for name in sorted(by_name):
        listed.append(by_name[name])
    return listed
