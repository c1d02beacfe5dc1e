"""One agent turn against the Messages API."""

import anthropic

from .system_prompt import build_agent_system_prompt, build_time_user_context

client = anthropic.Anthropic()


def process_message(tz: str | None, soul: str, history: list[dict], text: str) -> str:
    time_context = build_time_user_context(tz)
    messages = [*history, {"role": "user", "content": f"{time_context}\n\n{text}"}]
    response = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=1024,
        system=build_agent_system_prompt(tz, soul),
        messages=messages,
    )
    return response.content[0].text
