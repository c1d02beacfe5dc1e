"""The demo's workload: parents asking StoryTime for bedtime stories, several at once.

Each simulated user is one parent with one child (a ``Child`` of the app under test). A user
tells stories in *arcs* of four turns (a request, two follow-ups, the ending); each turn sends
the whole conversation so far, so the prompt grows turn by turn, then the next arc starts a new
conversation. Arcs are short on purpose: a history trimmed at the front would change the prefix
of every later request (a cache break of its own), and a model with a short context
(tinystories-656k, 512 tokens) must still hold a whole arc.

Users run concurrently, one thread each, through one ``openai.OpenAI`` client per variant. Both
variants get exactly the same users, questions, system prompt and order, so their numbers
compare. ``instructions.fit_instructions`` sizes the system prompt so that the largest request
fits the served model's context.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from promptcache.errors import DemoError

__all__ = [
    "CHILDREN",
    "MAX_USERS",
    "STORY_ARCS",
    "RequestResult",
    "UserPlan",
    "plan_workload",
    "run_variant",
]

#: The most simulated users (one thread and one engine sequence each): the sequences the demo's
#: engine runs at once, ``engine serve``'s default ``--max-num-seqs``; more would queue in the
#: engine instead of chatting at the same time.
MAX_USERS = 64

#: (name, age, favourite): one per simulated user, reused with a number past the list's end.
CHILDREN: tuple[tuple[str, int, str], ...] = (
    ("Mia", 4, "dogs"),
    ("Leo", 6, "trains"),
    ("Ava", 5, "the sea"),
    ("Sam", 3, "ducks"),
    ("Zoe", 7, "the stars"),
    ("Ben", 5, "cats"),
    ("Lily", 6, "flowers"),
    ("Max", 4, "big trucks"),
)

#: Four-turn story arcs; ``{name}`` is the child's name.
STORY_ARCS: tuple[tuple[str, str, str, str], ...] = (
    (
        "Tell me a short story about {name} and a friendly dog in the park.",
        "What did they find under the big tree?",
        "Why was the dog so happy?",
        "How does the story end?",
    ),
    (
        "Can you tell a story about {name} at the beach?",
        "Who did {name} meet by the water?",
        "What game did they play?",
        "What happened at bedtime?",
    ),
    (
        "Please tell a story about {name} and a little red bird.",
        "Where did the bird want to fly?",
        "How did {name} help the bird?",
        "And then what happened?",
    ),
    (
        "Tell me a story about {name} baking a cake with mom.",
        "What did they put in the cake?",
        "Who came to eat the cake?",
        "How does the story end?",
    ),
    (
        "Can you tell a story about {name} and a lost teddy bear?",
        "Where did they look for the bear?",
        "Who found the bear in the end?",
        "What did {name} say to say thank you?",
    ),
    (
        "Tell me a story about {name} on a rainy day.",
        "What did {name} do inside the house?",
        "Did the sun come out later?",
        "What happened when they went outside?",
    ),
)


@dataclass(frozen=True)
class UserPlan:
    """One simulated user: the child and the questions, grouped in conversations (arcs)."""

    user_id: str
    child: tuple[str, int, str]
    conversations: tuple[tuple[str, ...], ...]

    @property
    def num_requests(self) -> int:
        return sum(len(c) for c in self.conversations)


def plan_workload(users: int, requests_per_user: int) -> list[UserPlan]:
    """``users`` users with ``requests_per_user`` questions each, in four-turn arcs.

    User ``i`` starts at arc ``i`` (mod the number of arcs), so concurrent users tell
    different stories; the last arc is cut short when ``requests_per_user`` is not a multiple
    of four.
    """
    plans = []
    for i in range(users):
        name, age, favourite = CHILDREN[i % len(CHILDREN)]
        if i >= len(CHILDREN):
            name = f"{name}{i // len(CHILDREN) + 1}"
        conversations: list[tuple[str, ...]] = []
        left, arc = requests_per_user, i
        while left > 0:
            turns = STORY_ARCS[arc % len(STORY_ARCS)][:left]
            conversations.append(tuple(t.format(name=name) for t in turns))
            left -= len(turns)
            arc += 1
        plans.append(UserPlan(f"user{i + 1}", (name, age, favourite), tuple(conversations)))
    return plans


@dataclass(frozen=True)
class RequestResult:
    """One request as the client saw it.

    Attributes:
        user_id: which simulated user sent it.
        conversation: index of the arc; ``turn``: 0-based turn within it.
        prompt_tokens: tokens of the whole prompt (the server's ``usage.prompt_tokens``).
        cached_tokens: of those, served from the engine's prefix cache
            (``usage.prompt_tokens_details.cached_tokens``).
        output_tokens: generated tokens (``usage.completion_tokens``).
        ttft_ms: time from sending to the first streamed token, measured by the client.
        usage: the raw usage object, for pricing.
        answer: the text the model returned.
    """

    user_id: str
    conversation: int
    turn: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    ttft_ms: float
    usage: dict[str, Any]
    answer: str


def _result(user_id: str, conversation: int, turn: int, reply: Any) -> RequestResult:
    usage = reply.usage
    if not usage:
        raise DemoError(
            "the server sent no usage in its stream (stream_options.include_usage was set); "
            "the demo needs prompt_tokens_details.cached_tokens to measure caching"
        )
    details = usage.get("prompt_tokens_details") or {}
    return RequestResult(
        user_id=user_id,
        conversation=conversation,
        turn=turn,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        ttft_ms=reply.ttft_s * 1000.0,
        usage=usage,
        answer=reply.text,
    )


def run_variant(
    app_module: ModuleType,
    client: Any,
    model: str,
    plans: list[UserPlan],
    *,
    max_tokens: int,
    instructions: str | None = None,
    on_result: Callable[[RequestResult], None] | None = None,
    stop: threading.Event | None = None,
) -> list[RequestResult]:
    """Replay ``plans`` through ``app_module.StoryTime``, one thread per user, all at once.

    Args:
        app_module: ``examples/naive_app.py`` or ``examples/layered_app.py`` as a module (it
            must define ``Child(name, age, favourite)`` and ``StoryTime(client, model, child,
            max_tokens=, instructions=)`` with ``ask(question) -> Reply`` and ``new_story()``).
        client: an ``openai.OpenAI`` client pointed at the proxy.
        model: the model name the server knows.
        plans: from ``plan_workload``.
        max_tokens: answer length limit per request, in tokens.
        instructions: the system prompt text both apps send (None: the app's own file).
        on_result: called (from worker threads) after each request, e.g. to advance a progress
            bar.
        stop: when set, users stop before their next request (Ctrl-C, another user failed).

    Returns:
        Every request's result, in completion order.

    Raises:
        DemoError: a request failed; the message names the user, turn and the server's error.
    """
    stop = stop or threading.Event()
    results: list[RequestResult] = []
    lock = threading.Lock()

    def user(plan: UserPlan) -> None:
        app = app_module.StoryTime(
            client,
            model,
            app_module.Child(*plan.child),
            max_tokens=max_tokens,
            instructions=instructions,
        )
        for c, questions in enumerate(plan.conversations):
            app.new_story()
            for t, question in enumerate(questions):
                if stop.is_set():
                    return
                try:
                    reply = app.ask(question)
                except Exception as exc:  # openai raises APIError subclasses and httpx errors
                    stop.set()
                    raise DemoError(
                        f"{plan.user_id} (story {c + 1}, turn {t + 1}) failed: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                result = _result(plan.user_id, c, t, reply)
                with lock:
                    results.append(result)
                if on_result is not None:
                    on_result(result)

    pool = ThreadPoolExecutor(max_workers=len(plans), thread_name_prefix="demo-user")
    try:
        futures = [pool.submit(user, plan) for plan in plans]
        while not all(f.done() for f in futures):
            time.sleep(0.05)  # a short sleep keeps Ctrl-C responsive in the main thread
        for future in futures:
            future.result()
    except BaseException:
        # Do not wait for in-flight requests: the caller stops the servers, which ends them.
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results
