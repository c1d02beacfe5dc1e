"""Agents that render their system prompt with format_map over a context dict."""

from __future__ import annotations

from typing import Any

from .variables import add_clock, add_clock_nested, add_clock_to_copy, add_name, render


class ClockAgent:
    def __init__(self, template: str, context: dict[str, Any]) -> None:
        self.template = template
        self.context = context

    def messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        add_clock(self.context)
        prompt = render(self.template, self.context)
        return [{"role": "system", "content": prompt}, *history]  # PC001: 46


class NestedClockAgent:
    def __init__(self, template: str, context: dict[str, Any]) -> None:
        self.template = template
        self.context = context

    def messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        add_clock_nested(self.context)
        prompt = render(self.template, self.context)
        return [{"role": "system", "content": prompt}, *history]  # PC001: 46


class CopyAgent:
    """The clock goes into a copy that is never rendered."""

    def __init__(self, template: str, context: dict[str, Any]) -> None:
        self.template = template
        self.context = context

    def messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        add_clock_to_copy(self.context)
        prompt = render(self.template, self.context)
        return [{"role": "system", "content": prompt}, *history]


class NameAgent:
    """format_map over a dict that holds no volatile value."""

    def __init__(self, template: str, context: dict[str, Any], name: str) -> None:
        self.template = template
        self.context = context
        self.name = name

    def messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        add_name(self.context, self.name)
        prompt = render(self.template, self.context)
        return [{"role": "system", "content": prompt}, *history]


class FrozenClockAgent:
    """The clock is put in on the first turn only: every turn renders the same time."""

    def __init__(self, template: str, context: dict[str, Any]) -> None:
        self.template = template
        self.context = context
        self._frozen: dict[str, Any] | None = None

    def _variables(self) -> dict[str, Any]:
        if self._frozen is None:
            add_clock(self.context)
            self._frozen = dict(self.context)
        return self._frozen

    def messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prompt = render(self.template, self._variables())
        return [{"role": "system", "content": prompt}, *history]


class ResettingClockAgent:
    """As above, but each turn clears the frozen variables: the clock is put in every turn."""

    def __init__(self, template: str, context: dict[str, Any]) -> None:
        self.template = template
        self.context = context
        self._frozen: dict[str, Any] | None = None

    def new_turn(self) -> None:
        self._frozen = None

    def _variables(self) -> dict[str, Any]:
        if self._frozen is None:
            add_clock(self.context)
            self._frozen = dict(self.context)
        return self._frozen

    def messages(self, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        prompt = render(self.template, self._variables())
        return [{"role": "system", "content": prompt}, *history]  # PC001: 46
