"""One chat session: builds the system prompt each turn and asks the model."""

from __future__ import annotations

import datetime as _dt

import anthropic

from .prompt_builder import ChatPromptBuilder


class ChatSession:
    def __init__(self, project_notes: str, clock: _dt.datetime) -> None:
        self._client = anthropic.AsyncAnthropic()
        self._notes = project_notes
        # the task's anchor (its creation time), fixed for every turn of the task
        self._clock = clock
        self._history: list[dict] = []

    async def _build_system_prompt(self) -> str:
        stamp = self._clock.strftime("%A, %B %d, %Y")
        return ChatPromptBuilder().build(current_datetime=stamp, project_notes=self._notes)

    async def _plan(self, system: str) -> str:
        reply = await self._client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=2048,
            system=system,
            messages=self._history,
        )
        return reply.content[0].text

    async def turn(self, text: str) -> str:
        self._history.append({"role": "user", "content": text})
        system = await self._build_system_prompt()
        answer = await self._plan(system)
        self._history.append({"role": "assistant", "content": answer})
        return answer
