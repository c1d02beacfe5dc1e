"""100 parallel streams through one proxy: every row present and correct."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anthropic
import openai
from proxy_support import RunningProxy

STREAMS = 100


async def one_stream(
    a_client: anthropic.AsyncAnthropic, o_client: openai.AsyncOpenAI, i: int
) -> tuple[str, int]:
    """Stream request ``i`` (even: Anthropic, odd: OpenAI chat); returns (model, output tokens)."""
    headers = {"x-mock-delay-ms": "5", "x-mock-chunk": str(50 + i % 13)}
    if i % 2 == 0:
        model = f"claude-haiku-4-5-{i}"
        async with a_client.messages.stream(
            model=model,
            max_tokens=64,
            system=f"tenant {i}",
            messages=[{"role": "user", "content": f"request {i}"}],
            extra_headers=headers,
        ) as stream:
            message = await stream.get_final_message()
        return model, message.usage.output_tokens
    model = f"gpt-4o-{i}"
    chunks = await o_client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": f"request {i}"}],
        stream=True,
        extra_headers=headers,
    )
    count = 0
    async for chunk in chunks:
        assert chunk.choices, "the injected usage chunk leaked to a client that did not ask"
        count += 1
    return model, count


async def run_all(url: str) -> list[tuple[str, int]]:
    async with (
        anthropic.AsyncAnthropic(
            base_url=url, api_key="sk-ant-conc-0123456789", max_retries=0
        ) as a,
        openai.AsyncOpenAI(
            base_url=url + "/v1", api_key="sk-conc-0123456789abcdef", max_retries=0
        ) as o,
    ):
        return await asyncio.gather(*(one_stream(a, o, i) for i in range(STREAMS)))


def test_one_hundred_parallel_streams_each_get_their_own_correct_row(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy(batch_rows=32)
    results = asyncio.run(run_all(proxy.url))
    assert [output for model, output in results if model.startswith("claude")] == [220] * 50
    rows = proxy.rows(STREAMS)
    assert len(rows) == STREAMS
    assert len({r["id"] for r in rows}) == STREAMS
    by_model = {r["model"]: r for r in rows}
    assert set(by_model) == {model for model, _ in results}
    for model, row in by_model.items():
        assert row["status"] == 200 and row["error"] is None and row["stream"] == 1
        expected = (1532, 10240, 2048, 220) if model.startswith("claude") else (86, 1920, 0, 300)
        got = tuple(
            row[c]
            for c in (
                "uncached_input_tokens",
                "cache_read_tokens",
                "cache_write_5m_tokens",
                "output_tokens",
            )
        )
        assert got == expected, model
        assert row["ttft_ms"] <= row["latency_ms"]
    assert len({r["prefix_hash"] for r in rows}) == STREAMS  # each request its own prefix
