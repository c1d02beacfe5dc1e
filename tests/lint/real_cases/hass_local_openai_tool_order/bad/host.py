"""The home-automation host: integrations register intents at start-up, the LLM API lists them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Intent:
    name: str
    description: str
    slots: dict[str, Any]


_INTENTS: dict[str, Intent] = {}


def async_register(intent: Intent) -> None:
    _INTENTS[intent.name] = intent


def async_get() -> list[Intent]:
    return list(_INTENTS.values())


class Integration(Protocol):
    async def async_setup(self) -> None: ...


async def async_setup_integrations(integrations: list[Integration]) -> None:
    # set up concurrently: each registers its intents when its own setup gets there
    await asyncio.gather(*(integration.async_setup() for integration in integrations))


@dataclass
class APIInstance:
    tools: list[Intent] = field(default_factory=async_get)


@dataclass
class ChatLog:
    conversation_id: str
    content: list[dict[str, str]]
    llm_api: APIInstance | None = None
