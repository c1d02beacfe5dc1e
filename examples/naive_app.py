"""StoryTime, written the naive way: a bedtime-story chat whose prompt can never be cached.

StoryTime helps a parent tell a bedtime story, one short turn at a time. Every request sends a
long system prompt (the house style, a few rules and an example) followed by the conversation so
far. This version writes the current time and a fresh request id at the very top of that system
prompt, as many real apps do "so the model knows when it is" and "so we can grep the logs".

Prompt caches (the vendors' and the bundled engine's) reuse the longest *identical prefix* of a
request. Here the first line differs on every request, so no request shares even its first
block of tokens with any other: every token is prefilled again and billed at the full input
rate. ``promptcache lint examples/naive_app.py`` flags both values:

- PC001 (a time value in the cached prefix) for ``now`` in ``build_system_prompt``;
- PC002 (a unique id in the cached prefix) for ``request_id`` in ``build_system_prompt``.

The fixed twin is ``examples/layered_app.py``. ``promptcache demo`` runs both against the bundled
engine and prints the hit rates, latency and cost of each.

Use it (any OpenAI-compatible server; the demo points it at the promptcache proxy):

    from openai import OpenAI
    app = StoryTime(OpenAI(base_url="http://127.0.0.1:8787/v1", api_key="..."), "my-model",
                    Child("Mia", 5, "dogs"))
    print(app.ask("Tell me a short story about Mia and a dog.").text)
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from openai import OpenAI

#: The house style: the long, shared part of every system prompt.
STYLE_GUIDE = """\
You are StoryTime, a gentle helper that tells short bedtime stories to young children.
Rules for every story:
1. Use short sentences and simple words that a small child knows.
2. Every story has a kind hero, a small problem and a happy ending.
3. Nothing scary: no monsters, no fights, no one gets hurt or lost for long.
4. Animals can talk, and they are always friendly.
5. Name the child in the story when you know their name.
6. Keep each answer to two or three sentences, then stop and let the parent ask again.
7. If the parent asks why, explain it the way a kind teacher would.
Example:
Parent: Tell me a story about a cat.
StoryTime: Once upon a time, there was a little cat named Tom. He wanted to catch the moon."""


@dataclass(frozen=True)
class Child:
    """Who the story is for: ``age`` in years, ``favourite`` a thing the child loves."""

    name: str
    age: int
    favourite: str


@dataclass(frozen=True)
class Reply:
    """One answer: its text, the server's ``usage`` object (a dict: ``prompt_tokens``,
    ``completion_tokens``, ``prompt_tokens_details.cached_tokens``; None if the server sent
    none) and the time to the first streamed token, in seconds."""

    text: str
    usage: dict[str, Any] | None
    ttft_s: float


def build_system_prompt(child: Child) -> str:
    """The system prompt for one request: time and request id first, then the style guide."""
    now = datetime.now().strftime("%H:%M:%S")
    request_id = uuid.uuid4().hex[:12]
    return (
        f"Current time: {now}. Request id: {request_id}.\n"
        f"{STYLE_GUIDE}\n"
        f"The child is {child.name}, age {child.age}, who loves {child.favourite}."
    )


class StoryTime:
    """One child's story chat. ``ask`` sends the whole conversation each time (multi-turn).

    Args:
        client: an ``openai.OpenAI`` client (its ``base_url`` picks the server).
        model: the model name the server knows.
        child: who the stories are for.
        max_tokens: answer length limit in tokens.
    """

    def __init__(self, client: OpenAI, model: str, child: Child, *, max_tokens: int = 16) -> None:
        self.client = client
        self.model = model
        self.child = child
        self.max_tokens = max_tokens
        self.history: list[dict[str, str]] = []

    def new_story(self) -> None:
        """Forget the conversation so far (a new story)."""
        self.history = []

    def ask(self, question: str) -> Reply:
        """Send ``question`` with the conversation so far; stream the answer and remember it."""
        messages = [
            {"role": "system", "content": build_system_prompt(self.child)},
            *self.history,
            {"role": "user", "content": question},
        ]
        started = time.perf_counter()
        stream = self.client.chat.completions.create(
            model=self.model,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=self.max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        parts: list[str] = []
        ttft_s: float | None = None
        usage: dict[str, Any] | None = None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if ttft_s is None:
                    ttft_s = time.perf_counter() - started
                parts.append(chunk.choices[0].delta.content)
            if chunk.usage is not None:
                usage = chunk.usage.model_dump()
        text = "".join(parts).strip() or "..."
        self.history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": text},
        ]
        return Reply(text, usage, ttft_s if ttft_s is not None else time.perf_counter() - started)
