"""Health-check handlers: each gets its runner from a settings factory method (settings made
by a class method at import, or built in the handler) and sends a rendered system prompt."""

from __future__ import annotations

from prompts import render, render_plain
from settings import Settings

SETTINGS = Settings.from_env()


def health_check(question: str, template: str):
    runner = SETTINGS.make_runner(model="large")
    system_prompt = render(template, {"cluster": "east"})
    return runner.ask(system_prompt, question)  # PC001: 22


def health_check_local(question: str, template: str):
    settings = Settings()
    return settings.make_runner().ask(render(template, {}), question)  # PC001: 38


def health_check_plain(question: str, template: str):
    runner = SETTINGS.make_runner()
    return runner.ask(render_plain(template, {"cluster": "east"}), question)


def health_check_quiet(question: str, template: str):
    runner = SETTINGS.make_quiet_runner()
    return runner.ask(render(template, {"cluster": "east"}), question)
