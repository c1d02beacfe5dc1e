"""What the report's first recommendation says about a low hit rate that no prefix change
explains: it names the cause the log shows, new prefixes, prompts whose shared part is short, or
a prefix the engine no longer held.

A real tinystories engine on 127.0.0.1 behind a real proxy, the official ``openai`` client, a
real SQLite log and ``promptcache report``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import openai
from click.testing import CliRunner
from proxy_support import RunningProxy
from servers import ServerThread

from promptcache.cli import cli
from promptcache.engine import LLMEngine
from promptcache.engine.server import create_app
from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.report import build_report

TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"
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


def test_a_prefix_the_engine_evicted_is_not_blamed_on_parallel_requests(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # every request went after the one before had answered, yet the advice said to "wait for
    # its first token before fanning out parallel requests": a miss of an unchanged prefix
    # after its predecessor's first token is an upstream that dropped it, here a full KV pool
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=16, seed=0)
    with ServerThread(create_app(engine, served_model_names=["tiny"])) as server:
        upstream = UpstreamConfig(name="openai", url=server.url, vendor="engine")
        proxy = start_proxy(upstreams={"openai": upstream})
        client = _client(proxy)
        prompt = SHARED + _tail("Lily")[:200]
        reads = []
        for text in (prompt, prompt, *(_tail(name) for name in NAMES[1:]), prompt):
            reply = client.completions.create(model="tiny", prompt=text, max_tokens=2)
            assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
            reads.append(reply.usage.prompt_tokens_details.cached_tokens)
    # the engine's own figures: the second request read the first's blocks, the last read
    # nothing, the three long prompts between them having taken the 16-block pool
    assert reads[0] == 0 and reads[1] > 0 and reads[-1] == 0, reads
    rows = proxy.rows(6)
    assert [r["cache_read_tokens"] for r in rows] == reads
    last = rows[-1]
    assert (last["break_reason"], last["expected_hit"], last["unexpected_miss"]) == (None, 1, 1)
    assert last["previous_request_id"] == rows[1]["id"]
    assert last["started_at"] > rows[1]["ended_at"]  # sent after the predecessor had answered
    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.unexpected_misses == 1

    advice = _advice(proxy.db_path)
    assert "fanning out" not in advice and "parallel" not in advice, advice
    assert (
        "No prefix change explains it, but 1 request sent an unchanged prefix within the TTL, "
        "after the previous request's first token, and read nothing: the upstream no longer "
        "held the prefix (an engine evicts it when its KV pool fills and loses it when it "
        "restarts: --kv-cache-bytes, --kv-ram, --kv-disk; a vendor's cache is best effort: "
        "compare with its miss reason)." in advice
    ), advice
