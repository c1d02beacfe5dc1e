"""An OpenAI chat loop written the naive way: a random prompt_cache_key per request and the
system message rebuilt with the time on every turn."""

from __future__ import annotations

import time
import uuid
from typing import Any

import openai

client = openai.OpenAI()
RULES = "You answer billing questions in two sentences."


def chat(questions: list[str]) -> list[Any]:
    replies = []
    history: list[dict[str, str]] = []
    for question in questions:
        messages = [
            {"role": "system", "content": f"{RULES} Local time {time.strftime('%H:%M')}."},
            *history,
            {"role": "user", "content": question},
        ]
        reply = client.chat.completions.create(
            model="gpt-5",
            messages=messages,  # type: ignore[arg-type]
            prompt_cache_key=str(uuid.uuid4()),
        )
        history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": reply.choices[0].message.content or ""},
        ]
        replies.append(reply)
    return replies
