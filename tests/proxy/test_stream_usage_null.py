"""OpenAI chat streams whose chunks carry ``"usage": null``, through the proxy to the report.

With ``stream_options.include_usage`` OpenAI puts ``"usage":null`` on every chunk and sends the
usage in one last chunk with ``"choices":[]`` before ``data: [DONE]``. The mock upstream replays
such a stream byte for byte (tests/data/vendors/openai_chat/cached.sse); the official ``openai``
client talks to the proxy, once asking for usage, once not (the proxy asks for it and strips the
extra chunk), once without streaming. The expected counts are read here from the recorded
stream's own last chunk, and the prices from the bundled price table's row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
from click.testing import CliRunner
from proxy_support import RunningProxy
from upstreams import recorded, split_events

from promptcache.cli import cli
from promptcache.pricing import default_price_table
from promptcache.proxy.report import build_report

KEY = "sk-proj-usage-null-0123456789abcdefgh"
MODEL = "gpt-4o-2024-08-06"
MESSAGES: Any = [
    {"role": "system", "content": "You are a careful SQL reviewer. " * 40},
    {"role": "user", "content": "Review: SELECT * FROM orders"},
]


def _recorded_usage() -> dict[str, Any]:
    """The usage of the recorded stream: its one chunk whose usage is not null."""
    chunks = [
        json.loads(event.strip()[len(b"data: ") :])
        for event in split_events(recorded("openai_chat", "cached", "sse"))
        if event.strip().startswith(b"data: {")
    ]
    assert all("usage" in c for c in chunks)  # the wire format this test is about
    (usage,) = [c["usage"] for c in chunks if c["usage"] is not None]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == usage
    assert sum(c["usage"] is None for c in chunks) == len(chunks) - 1 >= 3
    return usage


def test_usage_null_chunks_count_once_in_rows_metrics_and_report(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    usage = _recorded_usage()
    prompt, output = usage["prompt_tokens"], usage["completion_tokens"]
    read = usage["prompt_tokens_details"]["cached_tokens"]
    proxy = start_proxy()
    with openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0) as client:
        asked = list(
            client.chat.completions.create(
                model=MODEL,
                messages=MESSAGES,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        # the client that asked gets the usage chunk, and None on every other chunk
        assert [c.usage is None for c in asked] == [True] * (len(asked) - 1) + [False]
        last = asked[-1].usage
        assert last is not None and (last.prompt_tokens, last.completion_tokens) == (
            prompt,
            output,
        )
        assert asked[-1].choices == []
        not_asked = list(
            client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
        )
        assert not_asked and all(c.choices for c in not_asked)  # the added chunk is stripped
        assert all(c.usage is None for c in not_asked)
        whole = client.chat.completions.create(model=MODEL, messages=MESSAGES)
        assert whole.usage is not None and whole.usage.prompt_tokens == prompt

    rows = proxy.rows(3)
    assert [r["stream"] for r in rows] == [1, 1, 0]
    for row in rows:
        assert (row["uncached_input_tokens"], row["cache_read_tokens"]) == (prompt - read, read)
        assert (row["output_tokens"], row["total_input_tokens"]) == (output, prompt)
        assert json.loads(row["usage_json"]) == usage  # the one usage, not a null one
        assert json.loads(row["usage_warnings"]) == []
        assert row["status"] == 200 and row["error"] is None
    assert len({(r["cost_usd"], r["cost_without_cache_usd"]) for r in rows}) == 1

    # the cost from the price row, worked out here
    price = default_price_table().lookup(MODEL)
    rated = (prompt - read) * price.input + read * price.cache_read + output * price.output
    cost = float(rated / 1_000_000)
    assert abs(float(rows[0]["cost_usd"]) - cost) < 1e-6

    metrics = httpx.get(proxy.url + "/metrics", timeout=10).text
    for name, value in (
        ("promptcache_input_tokens_total", 3 * (prompt - read)),  # uncached
        ("promptcache_cache_read_tokens_total", 3 * read),
        ("promptcache_output_tokens_total", 3 * output),
        ("promptcache_requests_total", 3),
    ):
        samples = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith(name + "{")
        ]
        assert sum(samples) == value, (name, samples)

    now = time.time() + 1
    report = build_report(proxy.db_path, since=now - 3600, until=now, now=now)
    total = report.total
    assert (total.requests, total.requests_with_usage, total.errors) == (3, 3, 0)
    assert (total.total_input_tokens, total.cache_read_tokens) == (3 * prompt, 3 * read)
    assert (total.uncached_input_tokens, total.output_tokens) == (3 * (prompt - read), 3 * output)
    assert total.token_hit_rate == read / prompt
    assert abs(total.cost_usd - 3 * cost) < 1e-6
    window = ["--db", str(proxy.db_path), "--since", repr(now - 3600), "--until", repr(now)]
    text = CliRunner().invoke(cli, ["report", *window, "--format", "json"])
    assert text.exit_code == 0, text.output
    printed = json.loads(text.output)["total"]
    assert printed["total_input_tokens"] == 3 * prompt
    assert printed["cache_read_tokens"] == 3 * read
    assert printed["requests_with_usage"] == 3
