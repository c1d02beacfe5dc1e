"""A session store whose context text begins with the current time, made by a factory."""

from __future__ import annotations

from datetime import datetime, timezone


class SessionStore:
    def __init__(self, table: dict) -> None:
        self.table = table

    def context_text(self, session_id: str) -> str:
        now = datetime.now(timezone.utc).isoformat()
        parts = [f"Current time: {now}"]
        for order in self.table.get(session_id, [])[-5:]:
            parts.append(f"- order {order}")
        return "\n".join(parts)

    def rules_text(self) -> str:
        return "Answer in two sentences."


def make_store(region: str | None = None) -> SessionStore:
    return SessionStore({})
