"""Builds the system prompt and the message list for one agent turn."""

from datetime import datetime


class ContextBuilder:
    def __init__(self, workspace: str) -> None:
        self.workspace = workspace

    def _identity(self) -> str:
        return f"# helper bot\n\n## Workspace\n{self.workspace}"

    def build_system_prompt(self) -> str:
        return "\n\n---\n\n".join([self._identity(), "Be brief."])

    def build_messages(self, history: list[dict], current: str) -> list[dict]:
        messages = [{"role": "system", "content": self.build_system_prompt()}]
        messages.extend(history)
        # the time rides on the newest user message, after the cached prefix
        now = datetime.now().strftime("%Y-%m-%d %H:%M (%A)")
        messages.append({"role": "user", "content": f"[Current time: {now}]\n\n{current}"})
        return messages
