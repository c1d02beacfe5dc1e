"""What the report's first recommendation says about a low hit rate that no prefix change
explains: it names the cause the log shows, new prefixes or prompts whose shared part is short.

A real tinystories engine on 127.0.0.1 behind a real proxy, the official ``openai`` client, a
real SQLite log and ``promptcache report``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import openai
from click.testing import CliRunner
from proxy_support import RunningProxy

from promptcache.cli import cli
from promptcache.proxy.config import UpstreamConfig

#: What every request starts with: 3 whole KV blocks of the engine (48 tokens) and a little.
SHARED = "Once upon a time there was a little dog named Max who lived in a big house. " * 3
NAMES = ("Lily", "Tom", "Sue", "Ben")


def _tail(name: str) -> str:
    """About 200 tokens that only one request sends."""
    return f"{name} had a red ball and played with it in the garden every day. " * 12


def _advice(db: Path) -> str:
    result = CliRunner().invoke(cli, ["report", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split("Recommendations", 1)[1].split())


def _client(proxy: RunningProxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="unused", max_retries=0)


def test_hits_that_read_a_short_shared_prefix_are_not_called_new_prefixes(
    start_proxy: Callable[..., RunningProxy], engine_url: str
) -> None:
    engine = UpstreamConfig(name="openai", url=engine_url, vendor="engine")
    proxy = start_proxy(upstreams={"openai": engine})
    client = _client(proxy)
    reads = []
    for name in NAMES:
        reply = client.completions.create(model="tiny", prompt=SHARED + _tail(name), max_tokens=2)
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        reads.append(reply.usage.prompt_tokens_details.cached_tokens)
    assert reads[0] == 0 and all(r > 0 for r in reads[1:]), reads
    rows = proxy.rows(4)
    assert [r["break_reason"] for r in rows] == ["new_prefix", None, None, None]
    read = sum(r["cache_read_tokens"] for r in rows)
    assert read * 2 < sum(r["total_input_tokens"] for r in rows)  # a low hit rate

    advice = _advice(proxy.db_path)
    assert "Most traffic opens new prefixes" not in advice, advice
    assert (
        "make the prefix stable first. 3 of 4 requests read from the cache, but most input "
        "comes after the part that repeats between requests: put what stays the same "
        "(instructions, tools, shared documents) first and what varies last." in advice
    ), advice


def test_requests_that_each_open_a_prefix_are_told_so(
    start_proxy: Callable[..., RunningProxy], engine_url: str
) -> None:
    engine = UpstreamConfig(name="openai", url=engine_url, vendor="engine")
    proxy = start_proxy(upstreams={"openai": engine})
    client = _client(proxy)
    for name in NAMES[:2]:  # a salt of its own: a family of its own, nothing to share
        client.completions.create(
            model="tiny",
            prompt=SHARED + _tail(name),
            max_tokens=2,
            extra_body={"cache_salt": f"tenant-{name}"},
        )
    rows = proxy.rows(2)
    assert [r["break_reason"] for r in rows] == ["new_prefix", "new_prefix"]
    assert [r["cache_read_tokens"] for r in rows] == [0, 0]

    advice = _advice(proxy.db_path)
    assert (
        "Token-weighted hit rate is 0.0%: make the prefix stable first. Most traffic opens new "
        "prefixes; caching pays only when the same prefix repeats within the TTL" in advice
    ), advice
