"""A count_tokens request reads and writes no cache: it is no request of a prefix family."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
from proxy_support import RunningProxy

from promptcache.proxy.report import build_report

KEY = "sk-ant-api03-count-tokens-test-key"
SYSTEM = [
    {"type": "text", "text": "You answer questions about ACME orders. " * 120,
     "cache_control": {"type": "ephemeral"}},
]  # fmt: skip
MESSAGES = [{"role": "user", "content": "Where is my order?"}]
# tests/data/vendors/anthropic: a miss writing 4,096 tokens, then a hit reading 10,240
WRITE, READ = "no_ttl_split", "cache_read_and_write_5m"


def test_count_tokens_is_nobodys_predecessor_and_no_break(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # each messages request followed a count_tokens of the same prompt (as clients check the
    # size first): the first, a plain first write, was an 'unexpected miss' whose advice was to
    # wait for the first token before fanning out, the count_tokens row was the family's
    # 'new_prefix', and the second request's read was credited to the count_tokens row, so the
    # first write counted as never read
    proxy = start_proxy()
    kwargs: dict[str, Any] = {"model": "claude-sonnet-4-5", "system": SYSTEM, "messages": MESSAGES}
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
        for case in (WRITE, READ):
            client.messages.count_tokens(**kwargs)
            client.messages.create(max_tokens=16, extra_headers={"x-mock-case": case}, **kwargs)
    counted, first, counted_again, second = proxy.rows(4)
    assert [r["route"] for r in (counted, counted_again)] == ["/v1/messages/count_tokens"] * 2
    for row in (counted, counted_again):
        assert (row["break_reason"], row["previous_request_id"]) == (None, None), row
        assert (row["expected_hit"], row["unexpected_miss"]) == (None, None), row
    assert (first["break_reason"], first["previous_request_id"]) == ("new_prefix", None)
    assert (first["cache_write_unknown_tokens"], first["unexpected_miss"]) == (4096, 0)
    assert (second["previous_request_id"], second["break_reason"]) == (first["id"], None)
    assert (second["cache_read_tokens"], second["expected_hit"]) == (10240, 1)

    later = time.time() + 3600  # both writes' 5-minute TTLs have run out
    report = build_report(proxy.db_path, since=later - 7200, until=later, now=later)
    assert (report.total.new_prefixes, report.total.unexpected_misses) == (1, 0)
    # the first write was read by the second request; only the second's own write never was
    assert (report.wasted_writes.tokens, report.wasted_writes.requests) == (2048, 1)
    assert not any("unchanged prefix" in r.message for r in report.recommendations)

    # a proxy started on this log rebuilds its families from it: the count_tokens row logged
    # last is no predecessor there either
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
        client.messages.count_tokens(**kwargs)
    proxy.rows(5)
    restarted = start_proxy(db_path=proxy.db_path)
    with anthropic.Anthropic(base_url=restarted.url, api_key=KEY, max_retries=0) as client:
        client.messages.create(max_tokens=16, extra_headers={"x-mock-case": READ}, **kwargs)
    third = restarted.rows(6)[-1]
    assert third["route"] == "/v1/messages" and third["previous_request_id"] == second["id"]


def test_gemini_count_tokens_is_no_break_either(start_proxy: Callable[..., RunningProxy]) -> None:
    proxy = start_proxy()
    body = {"contents": [{"role": "user", "parts": [{"text": "Where is my order? " * 200}]}]}
    for action in ("countTokens", "generateContent"):
        reply = httpx.post(
            f"{proxy.url}/v1beta/models/gemini-2.5-flash:{action}",
            json=body,
            headers={"x-goog-api-key": "gemini-count-tokens-test-key"},
        )
        assert reply.status_code == 200, reply.text
    counted, generated = proxy.rows(2)
    assert counted["route"].endswith(":countTokens") and counted["prefix_hash"]
    assert (counted["break_reason"], counted["expected_hit"]) == (None, None)
    assert (generated["break_reason"], generated["previous_request_id"]) == ("new_prefix", None)
