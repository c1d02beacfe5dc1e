"""System prompt sections, assembled by a small builder."""

import datetime
from zoneinfo import ZoneInfo


class PromptBuilder:
    def __init__(self) -> None:
        self._sections: list[tuple[str, str]] = []

    def add_section(self, title: str, body: str) -> None:
        self._sections.append((title, body))

    def build(self) -> str:
        return "\n\n".join(f"## {title}\n{body}" for title, body in self._sections)


def to_local_time(moment: datetime.datetime, tz: str | None) -> datetime.datetime:
    return moment.astimezone(ZoneInfo(tz)) if tz else moment


def build_local_datetime_section(tz: str | None) -> str:
    local = to_local_time(datetime.datetime.now(datetime.UTC), tz)
    return local.strftime("%A, %Y-%m-%d %I:%M %p %Z") + "\nUse this timezone for deadlines."


def build_agent_system_prompt(tz: str | None, soul: str) -> str:
    builder = PromptBuilder()
    builder.add_section("Identity", soul)
    builder.add_section("Current date and time", build_local_datetime_section(tz))
    builder.add_section("Recall", "Search memory before answering.")
    return builder.build()
