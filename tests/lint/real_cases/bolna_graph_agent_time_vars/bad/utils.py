"""Helpers for prompt variables of a phone-call agent."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo


class DictWithMissing(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def enrich_context_with_time_variables(context_data: dict[str, Any], timezone: str) -> None:
    """Put {current_date}, {current_time}, ... into the recipient data, for prompts and routing."""
    now = datetime.now(ZoneInfo(timezone))
    recipient_data = context_data.setdefault("recipient_data", {})
    recipient_data["current_date"] = now.strftime("%A, %B %d, %Y")
    recipient_data["current_time"] = now.strftime("%I:%M:%S %p")
    recipient_data["current_hour"] = now.hour
    recipient_data["current_weekday"] = now.strftime("%A").lower()


def update_prompt_with_context(prompt: str, context_data: dict[str, Any]) -> str:
    return prompt.format_map(DictWithMissing(context_data.get("recipient_data", {})))
