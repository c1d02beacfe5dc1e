"""A chat message class of its own module: the role comes first, by position."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    role: str
    content: str
