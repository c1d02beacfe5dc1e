"""Builds the system prompt and the message list for one agent turn."""

from datetime import datetime


class ContextBuilder:
    def __init__(self, workspace: str) -> None:
        self.workspace = workspace

    def _identity(self) -> str:
        now = datetime.now().strftime("%Y-%m-%d %H:%M (%A)")
        return f"# helper bot\n\n## Current Time\n{now}\n\n## Workspace\n{self.workspace}"

    def build_system_prompt(self) -> str:
        return "\n\n---\n\n".join([self._identity(), "Be brief."])

    def build_messages(self, history: list[dict], current: str) -> list[dict]:
        messages = [{"role": "system", "content": self.build_system_prompt()}]  # PC001: 50
        messages.extend(history)
        messages.append({"role": "user", "content": current})
        return messages
