"""The coding agent: a system prompt that lists the available skills."""

from __future__ import annotations

from pathlib import Path

import litellm

from .skills import load_skills

BASE = "You are a careful coding agent. Use a skill when one fits the task."


def system_prompt(skills_dir: Path) -> str:
    lines = [f"- {s.name}: {s.description}" for s in load_skills(skills_dir)]
    return BASE + "\n\n<available_skills>\n" + "\n".join(lines) + "\n</available_skills>"


def step(skills_dir: Path, history: list[dict]) -> str:
    messages = [{"role": "system", "content": system_prompt(skills_dir)}, *history]  # PC004: 46
    response = litellm.completion(model="anthropic/claude-sonnet-4-5", messages=messages)
    return response.choices[0].message.content
