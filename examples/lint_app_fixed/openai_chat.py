"""The OpenAI chat loop, fixed: a constant system message and a prompt_cache_key derived
from the user id, so every request of one user routes to the same cache."""

from __future__ import annotations

import time
from typing import Any

import openai

client = openai.OpenAI()
RULES = "You answer billing questions in two sentences."


def chat(user_id: str, questions: list[str]) -> list[Any]:
    replies = []
    history: list[dict[str, str]] = [{"role": "system", "content": RULES}]
    for question in questions:
        history.append(
            {"role": "user", "content": f"(local time {time.strftime('%H:%M')}) {question}"}
        )
        reply = client.chat.completions.create(
            model="gpt-5",
            messages=history,  # type: ignore[arg-type]
            prompt_cache_key=f"user-{user_id}",
        )
        history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        replies.append(reply)
    return replies
