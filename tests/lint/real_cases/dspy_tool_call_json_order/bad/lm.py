"""Call the model with the rendered history; the turns come back from a jsonb store."""

import litellm

from .adapter import format_turns


def ask(system: str, stored_turns: list[dict], question: str) -> str:
    messages = [{"role": "system", "content": system}, *format_turns(stored_turns)]  # PC003: 55
    messages.append({"role": "user", "content": question})
    response = litellm.completion(model="anthropic/claude-sonnet-4-6", messages=messages)
    return response.choices[0].message.content
