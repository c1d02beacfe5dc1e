"""Assembles the chat system prompt from its sections."""

from __future__ import annotations


class ChatPromptBuilder:
    def build(self, *, current_datetime: str, project_notes: str = "", memory: str = "") -> str:
        prompt = "You are a data analyst that writes and runs code in a scratchpad.\n"
        prompt += f"\nToday is {current_datetime}.\n"
        if project_notes:
            prompt += f"\n## Project\n{project_notes}\n"
        if memory:
            prompt += f"\n## Memory\n{memory}\n"
        return prompt
