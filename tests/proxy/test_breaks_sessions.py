"""Several users of one app through one proxy: interleaved sessions are not cache breaks.

Users of one app share the API key and the frozen system prompt (``messages[0]``), so they share
a prefix family. Each user's session starts with its own message (``messages[1]``) and grows.
The official ``openai`` client sends the users' requests interleaved (A1 B1 C1 A2 B2 C2 ...)
through a live proxy to the mock upstream; each request must be compared with the same user's
previous one (the longest live prefix), never with whichever user went just before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from proxy_support import RunningProxy

KEY = "sk-proj-sessions-test-0123456789abcdef"
SYSTEM = "You are Storytime, a bedtime-story teller for children. Keep it gentle. " * 40
USERS = ("mia", "leo", "ava")
ROUNDS = 3


def conversation(user: str, rounds: int) -> list[dict[str, Any]]:
    """The frozen system prompt, the user's session message, then ``rounds`` user turns."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "system", "content": f"The child's name is {user}. They like dragons."},
    ]
    for i in range(rounds):
        if i:
            messages.append({"role": "assistant", "content": f"Story part {i} for {user}. " * 5})
        messages.append({"role": "user", "content": f"{user}: tell me part {i + 1}, please."})
    return messages


def run_interleaved(proxy: RunningProxy, *, with_cache_key: bool) -> list[dict[str, Any]]:
    """Send every user's rounds interleaved; the logged rows in send order, keyed by user."""
    sent: list[str] = []
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=KEY, max_retries=0) as client:
        for round_ in range(1, ROUNDS + 1):
            for user in USERS:
                extra: dict[str, Any] = {"prompt_cache_key": f"storytime-{user}"}
                client.chat.completions.create(
                    model="gpt-4o",
                    messages=conversation(user, round_),  # type: ignore[arg-type]
                    extra_body=extra if with_cache_key else None,
                )
                sent.append(user)
    rows = proxy.rows(len(sent))
    for row, user in zip(rows, sent, strict=True):
        row["user"] = user
    return rows


@pytest.mark.parametrize("with_cache_key", [True, False])
def test_each_user_is_compared_with_their_own_previous_request(
    start_proxy: Callable[..., RunningProxy], with_cache_key: bool
) -> None:
    rows = run_interleaved(start_proxy(), with_cache_key=with_cache_key)
    last: dict[str, str] = {}
    for row in rows:
        user = row["user"]
        if user in last:  # a later round: the same user's previous request, no break
            assert row["previous_request_id"] == last[user], row
            assert row["break_reason"] is None, row
            assert row["expected_hit"] == 1
        last[user] = row["id"]
    first = [r for r in rows[: len(USERS)]]
    if with_cache_key:  # prompt_cache_key is part of the family: each user opens their own
        assert [r["break_reason"] for r in first] == ["new_prefix"] * len(USERS)
    else:  # one family; a new session differs from the closest earlier one at its own message
        assert first[0]["break_reason"] == "new_prefix"
        assert {r["break_segment"] for r in first[1:]} == {"messages[1].content"}
    assert sum(r["break_reason"] is not None for r in rows) == len(USERS)


def test_an_edit_is_still_a_break_among_interleaved_users(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    edited = conversation("mia", 2)
    edited[2]["content"] = "mia: tell me part one, please."  # mia's first turn rewritten
    with openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=KEY, max_retries=0) as client:
        for messages in (conversation("mia", 2), conversation("leo", 2), edited):
            client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    rows = proxy.rows(3)
    assert rows[2]["previous_request_id"] == rows[0]["id"]  # mia's, the longest shared prefix
    assert (rows[2]["break_reason"], rows[2]["break_segment"]) == (
        "messages_changed",
        "messages[2].content",
    )
