"""The proxy logs the vendors' own cache diagnoses, JSON and streamed, beside its own reason.

A mock vendor on 127.0.0.1 (``diagnostics_vendor.py``) compares requests as Anthropic's cache
diagnostics and OpenAI's prompt cache diagnostics document it; the official ``anthropic`` and
``openai`` clients talk to it through the proxy and ask for diagnoses themselves. Each row's
``vendor_miss_reason`` and ``vendor_cache_missed_tokens`` are checked against what the mock
sent for that response id, and ``break_reason`` against the change the test made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from diagnostics_vendor import (  # noqa: F401 (fixtures)
    VendorServer,
    diagnostics_vendor_fixture,
    start_diagnosing_proxy_fixture,
)
from proxy_support import RunningProxy

KEY = "sk-ant-api03-diagnostics-test-0123456789"
OPENAI_KEY = "sk-proj-diagnostics-test-0123456789abcdef"
MODEL = "claude-sonnet-4-5"
SYSTEM = "You are the support agent of Acme Anvils. Answer briefly and cite the manual. " * 40


def system(text: str = SYSTEM) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def user(text: str, *, cached: bool = False) -> dict[str, Any]:
    """A user message; ``cached`` puts a cache breakpoint on it (the messages are cached)."""
    block: dict[str, Any] = {"type": "text", "text": text}
    if cached:
        block["cache_control"] = {"type": "ephemeral"}
    return {"role": "user", "content": [block]}


def assistant(text: str = "ok") -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def ask(
    client: anthropic.Anthropic,
    messages: list[dict[str, Any]],
    previous: str | None,
    *,
    stream: bool = False,
    system_blocks: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> str:
    """One Messages request naming ``previous`` for the vendor's diagnosis; the response id."""
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 16,
        "system": system_blocks or system(),
        "messages": messages,
        "diagnostics": {"previous_message_id": previous},
        "extra_headers": headers or {},
    }
    if stream:
        with client.messages.stream(**kwargs) as events:
            return events.get_final_message().id
    return client.messages.create(**kwargs).id


def by_response(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["response_id"]: row for row in rows}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_diagnoses_are_logged_beside_our_reason(
    start_diagnosing_proxy: Callable[..., RunningProxy],
    diagnostics_vendor: VendorServer,
    stream: bool,
) -> None:
    proxy = start_diagnosing_proxy()
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
        first = ask(client, [user("How heavy is the A-100 anvil?")], None, stream=stream)
        turn = [user("How heavy is the A-100 anvil?"), assistant(), user("And the A-200?")]
        second = ask(client, turn, first, stream=stream)  # appended: no divergence
        edited = system(SYSTEM + " Today is Thursday.")
        third = ask(client, turn, second, stream=stream, system_blocks=edited)
        lost = ask(client, turn, "msg_unknown", stream=stream, system_blocks=edited)
        down = ask(client, turn, third, stream=stream, system_blocks=edited,
                   headers={"x-mock-diagnosis": "unavailable"})  # fmt: skip
        late = ask(client, turn, third, stream=stream, system_blocks=edited,
                   headers={"x-mock-diagnosis": "pending"})  # fmt: skip
    rows = by_response(proxy.rows(6))
    sent = diagnostics_vendor.vendor.sent
    assert sent[first] is None and sent[second] is None
    assert sent[third]["cache_miss_reason"]["type"] == "system_changed"

    assert rows[first]["vendor_miss_reason"] is None  # a first turn: nothing to compare
    assert rows[first]["vendor_comparison_id"] is None
    assert rows[second]["vendor_comparison_id"] == first
    assert rows[second]["vendor_miss_reason"] == "no_divergence"
    assert rows[second]["break_reason"] is None
    assert rows[third]["vendor_comparison_id"] == second
    assert rows[third]["vendor_miss_reason"] == "system_changed"
    assert rows[third]["break_reason"] == "system_changed"
    missed = sent[third]["cache_miss_reason"]["cache_missed_input_tokens"]
    assert missed > 0 and rows[third]["vendor_cache_missed_tokens"] == missed
    assert rows[lost]["vendor_miss_reason"] == "previous_message_not_found"
    assert rows[lost]["vendor_cache_missed_tokens"] is None
    assert rows[down]["vendor_miss_reason"] == "unavailable"
    assert rows[late]["vendor_miss_reason"] == "pending"
    for row in rows.values():
        assert row["stream"] == int(stream)
        assert row["vendor_diagnostics_added"] is None  # the client asked, not the proxy
        assert row["status"] == 200 and row["error"] is None


def test_anthropic_model_tools_and_messages_changes(
    start_diagnosing_proxy: Callable[..., RunningProxy], diagnostics_vendor: VendorServer
) -> None:
    proxy = start_diagnosing_proxy()
    tool = {"name": "stock", "description": "Units in stock.", "input_schema": {"type": "object"}}
    other = {"name": "price", "description": "List price.", "input_schema": {"type": "object"}}
    turn = [user("Is the A-100 in stock?"), assistant(), user("And the A-200?", cached=True)]
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:

        def call(model: str, tools: list[dict[str, Any]], messages: Any, previous: Any) -> str:
            return client.messages.create(
                model=model, max_tokens=16, system=system(), tools=tools, messages=messages,
                diagnostics={"previous_message_id": previous},
            ).id  # fmt: skip

        base = call(MODEL, [tool, other], turn, None)
        tools = call(MODEL, [tool, other][::-1], turn, base)
        model = call("claude-haiku-4-5", [other, tool], turn, tools)
        rewritten = [user("Is the A-100 in stock today?"), *turn[1:]]
        messages = call("claude-haiku-4-5", [other, tool], rewritten, model)
    rows = by_response(proxy.rows(4))
    sent = diagnostics_vendor.vendor.sent
    for rid, reason in ((tools, "tools_changed"), (model, "model_changed"),
                        (messages, "messages_changed")):  # fmt: skip
        assert sent[rid]["cache_miss_reason"]["type"] == reason
        assert rows[rid]["vendor_miss_reason"] == reason
        assert rows[rid]["vendor_cache_missed_tokens"] == (
            sent[rid]["cache_miss_reason"]["cache_missed_input_tokens"]
        )
    assert rows[tools]["break_reason"] == "tools_reordered"
    assert rows[model]["break_reason"] == "model_changed"
    assert rows[messages]["break_reason"] == "messages_changed"


def test_a_new_question_is_no_break_for_us_but_a_change_for_the_vendor(
    start_diagnosing_proxy: Callable[..., RunningProxy],
) -> None:
    """A stateless app asks a new question on the same system prompt: the vendor reports
    ``messages_changed`` (an earlier entry differs), the explainer no break (everything before
    the last message is still read). The log keeps both; the report counts it as a
    disagreement (test_vendor_diagnostics_report.py)."""
    proxy = start_diagnosing_proxy()
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
        first = ask(client, [user("How heavy is the A-100 anvil?")], None)
        second = ask(client, [user("Where is my order 1234?")], first)
    rows = by_response(proxy.rows(2))
    assert rows[second]["vendor_miss_reason"] == "messages_changed"
    assert rows[second]["break_reason"] is None
    assert rows[second]["previous_request_id"] == rows[first]["id"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_responses_diagnoses_are_logged(
    start_diagnosing_proxy: Callable[..., RunningProxy],
    diagnostics_vendor: VendorServer,
    stream: bool,
) -> None:
    proxy = start_diagnosing_proxy()
    instructions = "You answer questions about Acme Anvils from the manual. " * 40
    tool = {"type": "function", "name": "get_time", "parameters": {"type": "object"}}
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0) as client:

        def call(tools: list[dict[str, Any]], given: Any, compared: str | None) -> str:
            kwargs: dict[str, Any] = {"model": "gpt-5.6", "instructions": instructions,
                                      "input": given, "tools": tools}  # fmt: skip
            if compared is not None:
                kwargs["prompt_cache_options"] = {"comparison_response_id": compared}
            if stream:
                with client.responses.stream(**kwargs) as events:
                    return events.get_final_response().id
            return client.responses.create(**kwargs).id

        first = call([tool], "Reply with exactly OK.", None)
        hit = call([tool], "Reply with exactly OK.", first)
        renamed = call([{**tool, "name": "get_date"}], "Reply with exactly OK.", hit)
        missing = call([tool], "Reply with exactly OK.", "resp_unknown")
    rows = by_response(proxy.rows(4))
    sent = diagnostics_vendor.vendor.sent
    assert rows[first]["vendor_miss_reason"] is None and rows[first]["vendor_comparison_id"] is None
    assert sent[hit] == {"type": "cache_hit"} and rows[hit]["vendor_miss_reason"] == "cache_hit"
    assert rows[hit]["vendor_comparison_id"] == first
    assert sent[renamed]["reason"] == "tools_changed"
    assert rows[renamed]["vendor_miss_reason"] == "tools_changed"
    assert rows[renamed]["vendor_cache_missed_tokens"] == sent[renamed]["cache_missed_tokens"] > 0
    assert rows[renamed]["break_reason"] == "tools_changed"
    assert rows[missing]["vendor_miss_reason"] == "comparison_response_not_found"
    for row in rows.values():
        assert row["api"] == "openai_responses" and row["stream"] == int(stream)
