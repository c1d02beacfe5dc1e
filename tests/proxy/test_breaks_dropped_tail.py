"""A chat request that drops the last messages of an earlier one, through the proxy to our engine.

The engine caches every prefix automatically, so a request whose messages all repeat an earlier
request's (a new conversation that starts with that one's first turn, a retry of an earlier
turn) reads every whole block the two share: nothing a stable prefix would have kept is lost,
and the report must not call it a cache break. A real tinystories engine on 127.0.0.1 behind a
real proxy, the official ``openai`` client, a real SQLite log and report.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import openai
import pytest
from proxy_support import RunningProxy

from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.report import build_report
from promptcache.proxy.report.render import render_table

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
SYSTEM = (
    "Once upon a time there was a little girl named Lily who loved to play in the park with "
    "her dog. "
) * 6
BLOCK_SIZE = 16


@pytest.fixture(scope="module")
def engine_chat_template() -> str:
    """``engine_url``'s engine (conftest.py) renders chat requests with CHAT_TEMPLATE."""
    return CHAT_TEMPLATE


def test_dropping_the_last_messages_is_no_break_where_caching_is_automatic(
    start_proxy: Callable[..., RunningProxy], engine_url: str
) -> None:
    engine = UpstreamConfig(name="openai", url=engine_url, vendor="engine")
    proxy = start_proxy(upstreams={"openai": engine})
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="unused", max_retries=0)
    first_turn = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hello"}]
    conversations = [
        [*first_turn, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "q1"}],
        first_turn,  # a new conversation: its messages are the longer one's first ones
    ]
    usages = []
    for messages in conversations:
        reply = client.chat.completions.create(
            model="tiny",
            messages=messages,  # type: ignore[arg-type]
            max_tokens=4,
            temperature=0,
        )
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        usages.append(reply.usage)
    # the engine's own figures: the second request read every whole block but the one holding
    # its last token (always computed again), so nothing was lost
    short = usages[1]
    assert short.prompt_tokens_details is not None
    most = (short.prompt_tokens - 1) // BLOCK_SIZE * BLOCK_SIZE
    assert most > 0 and short.prompt_tokens_details.cached_tokens == most

    rows = proxy.rows(2)
    assert [r["cache_read_tokens"] for r in rows] == [0, most]
    assert rows[0]["break_reason"] == "new_prefix"
    assert rows[1]["break_reason"] is None, rows[1]["break_segment"]
    assert (rows[1]["expected_hit"], rows[1]["unexpected_miss"]) == (1, 0)
    assert rows[1]["previous_request_id"] == rows[0]["id"]

    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.breaks == 0
    assert not report.break_reasons
    assert "history_rewritten" not in render_table(report, width=200)
