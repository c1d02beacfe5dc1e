"""StoryTime, written the naive way: a bedtime-story chat whose prompt can never be cached.

StoryTime helps a parent tell a bedtime story, one short turn at a time. Every request sends a
long system prompt (the product's instructions, about 1,500 tokens, read from
``storytime_instructions.md``) followed by the conversation so far. This version writes the
current time and a fresh request id at the very top of that system prompt, as many real apps do
"so the model knows when it is" and "so we can grep the logs".

Prompt caches (the vendors' and the bundled engine's) reuse the longest *identical prefix* of a
request. Here the prompt changes within its first line on every request, so two requests share
only the tokens before the time (before the request id, within one second): the rest is prefilled
again, billed at the full input rate. ``promptcache lint examples/naive_app.py`` flags both values:

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
from pathlib import Path
from typing import Any

from openai import OpenAI

#: The product's instructions (about 1,500 tokens): the long, shared part of every system prompt.
INSTRUCTIONS_PATH = Path(__file__).with_name("storytime_instructions.md")


def load_instructions(path: Path = INSTRUCTIONS_PATH) -> str:
    """The assistant's instructions, as the product team wrote them (Markdown)."""
    return path.read_text(encoding="utf-8")


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


def build_system_prompt(child: Child, instructions: str) -> str:
    """The system prompt for one request: time and request id first, then the instructions."""
    now = datetime.now().strftime("%H:%M:%S")
    request_id = uuid.uuid4().hex[:12]
    return (
        f"Current time: {now}. Request id: {request_id}.\n"
        f"{instructions}\n"
        f"The child is {child.name}, age {child.age}, who loves {child.favourite}."
    )


class StoryTime:
    """One child's story chat. ``ask`` sends the whole conversation each time (multi-turn).

    Args:
        client: an ``openai.OpenAI`` client (its ``base_url`` picks the server).
        model: the model name the server knows.
        child: who the stories are for.
        max_tokens: answer length limit in tokens.
        instructions: the assistant's instructions (default: ``storytime_instructions.md``).
    """

    def __init__(
        self,
        client: OpenAI,
        model: str,
        child: Child,
        *,
        max_tokens: int = 32,
        instructions: str | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.child = child
        self.max_tokens = max_tokens
        self.instructions = load_instructions() if instructions is None else instructions
        self.history: list[dict[str, str]] = []

    def new_story(self) -> None:
        """Forget the conversation so far (a new story)."""
        self.history = []

    def messages_for(self, question: str) -> list[dict[str, str]]:
        """The chat messages ``ask(question)`` sends: system prompt, history, the question."""
        return [
            {"role": "system", "content": build_system_prompt(self.child, self.instructions)},
            *self.history,
            {"role": "user", "content": question},
        ]

    def remember(self, question: str, answer: str) -> None:
        """Append one turn (the question as sent, the answer) to the conversation."""
        self.history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ]

    def ask(self, question: str) -> Reply:
        """Send ``question`` with the conversation so far; stream the answer and remember it."""
        messages = self.messages_for(question)
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
        self.remember(question, text)
        return Reply(text, usage, ttft_s if ttft_s is not None else time.perf_counter() - started)


if __name__ == "__main__":
    # One short story of three turns against OPENAI_BASE_URL (`promptcache check` sets it to
    # its capture endpoint; the demo points it at the proxy): `python examples/naive_app.py`.
    import os

    story = StoryTime(
        OpenAI(), os.environ.get("STORYTIME_MODEL", "gpt-4o-mini"), Child("Mia", 5, "dogs")
    )
    for turn in ("Tell me a short story about a dog.", "What happens next?", "How does it end?"):
        print(story.ask(turn).text)
