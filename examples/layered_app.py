"""StoryTime, built with promptcache's ``PromptBuilder``: the same app as ``naive_app.py``, cached.

The same bedtime-story chat, the same style guide and the same information in each request, but
laid out from the most stable content to the least, so that requests share a long prefix:

1. **frozen** (byte-identical for every child and request): who StoryTime is,
   the rules, an example;
2. **session** (stable for one child): the child's name, age and favourite thing;
3. **history**: the conversation so far, append-only;
4. **dynamic** (last, changes every request): the time of day and the parent's question.

The request id is still sent, but as an HTTP header, where it cannot touch the prompt. A prompt
cache can now reuse the frozen prefix across all children, and each child's earlier turns within
a story. ``promptcache lint examples/layered_app.py`` reports nothing.

Use it exactly like the naive app:

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

from promptcache import PromptBuilder

RULES = """1. Use short sentences and simple words that a small child knows.
2. Every story has a kind hero, a small problem and a happy ending.
3. Nothing scary: no monsters, no fights, no one gets hurt or lost for long.
4. Animals can talk, and they are always friendly.
5. Name the child in the story when you know their name.
6. Keep each answer to two or three sentences, then stop and let the parent ask again.
7. If the parent asks why, explain it the way a kind teacher would."""

SYSTEM = "You are StoryTime, a gentle helper that tells short bedtime stories to young children."
EXAMPLE_QUESTION = "Tell me a story about a cat."
EXAMPLE_ANSWER = "Once upon a time, there was a little cat named Tom. He wanted to catch the moon."


def frozen_layer(model: str, cache_key: str) -> PromptBuilder:
    """The frozen layer: every request of every child starts with these exact bytes.

    ``cache_key`` is sent as OpenAI's ``prompt_cache_key`` (a stable id that routes requests
    sharing a prefix to the same cache); servers without prefix routing ignore it.
    """
    return (
        PromptBuilder(model, cache_key=cache_key)
        .system(SYSTEM)
        .rules(RULES, title="Rules for every story")
        .example(EXAMPLE_QUESTION, EXAMPLE_ANSWER)
    )


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
        self.child = child
        self.max_tokens = max_tokens
        # The session layer: one block per child, then the append-only history.
        self.session = frozen_layer(model, f"storytime-{child.name.lower()}").session(
            f"The child is {child.name}, age {child.age}, who loves {child.favourite}."
        )
        self.conversation = self.session.fork()

    def new_story(self) -> None:
        """Forget the conversation so far (a new story); the child's session layer stays."""
        self.conversation = self.session.fork()

    def ask(self, question: str) -> Reply:
        """Send ``question`` with the conversation so far; stream the answer and remember it."""
        now = datetime.now().strftime("%H:%M")
        turn = f"(It is {now}.) {question}"
        request = self.conversation.fork().dynamic(turn)
        params = request.to_openai_chat(max_completion_tokens=self.max_tokens)
        started = time.perf_counter()
        stream = self.client.chat.completions.create(
            **params,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-request-id": uuid.uuid4().hex[:12]},
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
        # Append exactly what was sent, so the next request repeats this turn byte for byte.
        self.conversation.add_user(turn).add_assistant(text)
        return Reply(text, usage, ttft_s if ttft_s is not None else time.perf_counter() - started)
