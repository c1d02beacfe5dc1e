"""Helpers that put prompt variables into a caller's dict: the time into an entry it shares
(``setdefault``, ``[key]``), or into a copy that the caller never sees."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def add_clock(context: dict[str, Any]) -> None:
    now = datetime.now()
    person = context.setdefault("person", {})
    person["clock"] = now.strftime("%H:%M:%S")
    person["weekday"] = now.strftime("%A")


def add_clock_nested(context: dict[str, Any]) -> None:
    person = context["person"]
    details = person.setdefault("details", {})
    details["clock"] = datetime.now().strftime("%H:%M")


def add_clock_to_copy(context: dict[str, Any]) -> dict[str, Any]:
    person = dict(context.get("person", {}))
    person["clock"] = datetime.now().strftime("%H:%M")
    return {"person": person}


def add_name(context: dict[str, Any], name: str) -> None:
    person = context.setdefault("person", {})
    person["name"] = name


def render(template: str, context: dict[str, Any]) -> str:
    return template.format_map(context.get("person", {}))
