"""One agent turn against the Messages API."""

import anthropic

from .system_prompt import build_agent_system_prompt

client = anthropic.Anthropic()


def process_message(tz: str | None, soul: str, history: list[dict], text: str) -> str:
    messages = [*history, {"role": "user", "content": text}]
    response = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=1024,
        system=build_agent_system_prompt(tz, soul),  # PC001: 15
        messages=messages,
    )
    return response.content[0].text
