"""Prompt templates rendered with a context; one renderer adds the current time to it."""

from __future__ import annotations

from datetime import datetime


def render(template: str, context: dict) -> str:
    full = {**context, "now": datetime.now().strftime("%Y-%m-%d %H:%M:%S")}
    return template.format(**full)


def render_plain(template: str, context: dict) -> str:
    return template.format(**context)
