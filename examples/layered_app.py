"""StoryTime, built with promptcache's ``PromptBuilder``: the same app as ``naive_app.py``, cached.

The same bedtime-story chat, the same instructions and the same information in each request, but
laid out from the most stable content to the least, so that requests share a long prefix:

1. **frozen** (byte-identical for every child and request): the product's instructions, about
   1,500 tokens, read from ``storytime_instructions.md``;
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
from pathlib import Path
from typing import Any

from openai import OpenAI

from promptcache import PromptBuilder

#: The product's instructions (about 1,500 tokens), the same file the naive app reads.
INSTRUCTIONS_PATH = Path(__file__).with_name("storytime_instructions.md")


def load_instructions(path: Path = INSTRUCTIONS_PATH) -> str:
    """The assistant's instructions, as the product team wrote them (Markdown)."""
    return path.read_text(encoding="utf-8")


def frozen_layer(model: str, cache_key: str, instructions: str) -> PromptBuilder:
    """The frozen layer: every request of every child starts with these exact bytes.

    ``cache_key`` is sent as OpenAI's ``prompt_cache_key`` (a stable id that routes requests
    sharing a prefix to the same cache); servers without prefix routing ignore it.
    """
    return PromptBuilder(model, cache_key=cache_key).system(instructions)


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
        instructions: the frozen layer's text (default: ``storytime_instructions.md``).
    """

    def __init__(
        self, client: OpenAI, model: str, child: Child, *,
        max_tokens: int = 32, instructions: str | None = None,
    ) -> None:  # fmt: skip
        self.client = client
        self.child = child
        self.max_tokens = max_tokens
        instructions = load_instructions() if instructions is None else instructions
        # The session layer: one block per child, then the append-only history.
        cache_key = f"storytime-{child.name.lower()}"
        self.session = frozen_layer(model, cache_key, instructions).session(
            f"The child is {child.name}, age {child.age}, who loves {child.favourite}."
        )
        self.conversation = self.session.fork()

    def new_story(self) -> None:
        """Forget the conversation so far (a new story); the child's session layer stays."""
        self.conversation = self.session.fork()

    def request_for(self, question: str) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments of ``ask(question)``: the layers, the
        history, then the dynamic tail (time of day and question) as the last user message."""
        now = datetime.now().strftime("%H:%M")
        request = self.conversation.fork().dynamic(f"(It is {now}.) {question}")
        return request.to_openai_chat(max_completion_tokens=self.max_tokens)

    def messages_for(self, question: str) -> list[dict[str, str]]:
        """The chat messages ``ask(question)`` sends."""
        return list(self.request_for(question)["messages"])

    def remember(self, question: str, answer: str) -> None:
        """Append one turn to the history: ``question`` exactly as sent (the last message of
        ``messages_for``), so the next request repeats it byte for byte, and the answer."""
        self.conversation.add_user(question).add_assistant(answer)

    def ask(self, question: str) -> Reply:
        """Send ``question`` with the conversation so far; stream the answer and remember it."""
        params = self.request_for(question)
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
        self.remember(params["messages"][-1]["content"], text)
        return Reply(text, usage, ttft_s if ttft_s is not None else time.perf_counter() - started)


if __name__ == "__main__":
    # One short story of three turns against OPENAI_BASE_URL (`promptcache check` sets it to
    # its capture endpoint; the demo points it at the proxy): `python examples/layered_app.py`.
    import os

    story = StoryTime(
        OpenAI(), os.environ.get("STORYTIME_MODEL", "gpt-4o-mini"), Child("Mia", 5, "dogs")
    )
    for turn in ("Tell me a short story about a dog.", "What happens next?", "How does it end?"):
        print(story.ask(turn).text)
