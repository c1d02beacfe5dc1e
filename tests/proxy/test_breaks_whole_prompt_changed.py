"""A one-message prompt rewritten from its first character, through the proxy to our engine.

A legacy completions ``prompt`` (or a chat request holding one user message) is a single
segment: the request's own last message. A new question at its end is no break (the engine
still reads the blocks before it: an expected hit), and a prompt changed at its very start is
none either, as the explainer reads the last message as the request's dynamic tail. But that
request shares nothing with the previous one, so the upstream reading nothing is what it
should do: it must not be an ``expected_hit`` nor an ``unexpected_miss``, and the report must
not say that a request "sent an unchanged prefix within the TTL but read nothing". A real
tinystories engine on 127.0.0.1 behind a real proxy, the official ``openai`` client, a real
SQLite log and report.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import openai
from proxy_support import RunningProxy

from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.report import build_report
from promptcache.proxy.report.render import render_table

STORY = (
    "Once upon a time there was a little dog named Max who lived in a big house with a garden. "
) * 8


def test_a_prompt_changed_at_its_start_is_no_expected_hit(
    start_proxy: Callable[..., RunningProxy], engine_url: str
) -> None:
    engine = UpstreamConfig(name="openai", url=engine_url, vendor="engine")
    proxy = start_proxy(upstreams={"openai": engine})
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="unused", max_retries=0)
    prompts = [
        STORY + "Question 0: what happened?",
        STORY + "Question 1: what happened?",  # a new question at the end: read from cache
        "Today 12:00. " + STORY,  # changed at character 0: nothing to read
    ]
    reads = []
    for prompt in prompts:
        reply = client.completions.create(model="tiny", prompt=prompt, max_tokens=4)
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        reads.append(reply.usage.prompt_tokens_details.cached_tokens)
    assert reads[0] == 0 and reads[1] > 0 and reads[2] == 0, reads

    rows = proxy.rows(3)
    assert [r["break_reason"] for r in rows] == ["new_prefix", None, None]
    assert rows[2]["previous_request_id"] == rows[1]["id"]
    assert [(r["expected_hit"], r["unexpected_miss"]) for r in rows] == [(0, 0), (1, 0), (0, 0)]

    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.unexpected_misses == 0
    assert report.total.hit_requests == 1
    text = render_table(report, width=200)
    assert "unchanged prefix" not in text
    assert not any("unchanged prefix" in str(item) for item in report.recommendations)
