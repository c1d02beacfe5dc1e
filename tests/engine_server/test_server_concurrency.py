"""Many streams at once, and clients that go away: every request ends, every KV block comes back."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from server_support import LONG_PROMPT, MODEL_NAME, NUM_BLOCKS, Server

from promptcache.engine import LLM, SamplingParams

NUM_STREAMS = 32


def test_32_concurrent_streams_all_complete_with_python_api_text(
    server: Server, async_client: openai.AsyncOpenAI, reference: LLM
) -> None:
    prompts = [f"{LONG_PROMPT} number {i}" if i % 2 else f"Story {i}: once" for i in range(32)]
    max_tokens = [8 + (i % 5) * 4 for i in range(NUM_STREAMS)]

    async def one(i: int) -> tuple[str, str | None, int]:
        text, finish, completion_tokens = "", None, 0
        stream = await async_client.completions.create(
            model=MODEL_NAME,
            prompt=prompts[i],
            max_tokens=max_tokens[i],
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.text
                finish = choice.finish_reason or finish
            if chunk.usage is not None:
                completion_tokens = chunk.usage.completion_tokens
        return text, finish, completion_tokens

    async def run_all() -> list[tuple[str, str | None, int]]:
        async with async_client:
            return await asyncio.gather(*(one(i) for i in range(NUM_STREAMS)))

    results = asyncio.run(run_all())
    expected = reference.generate(
        prompts, [SamplingParams(temperature=0, max_tokens=m) for m in max_tokens]
    )
    assert len(results) == NUM_STREAMS
    for (text, finish, completion_tokens), exp in zip(results, expected, strict=True):
        assert finish in ("stop", "length")
        assert text == exp.text
        assert completion_tokens == len(exp.output_token_ids)
    metrics = server.wait_idle()
    assert metrics["promptcache_engine_kv_cache_free_blocks"] == NUM_BLOCKS


def _aborts(server: Server) -> float:
    return server.metrics().get("promptcache_engine_requests_total{outcome=abort}", 0.0)


def test_disconnected_streams_are_aborted_and_free_their_blocks(server: Server) -> None:
    server.wait_idle()
    before = _aborts(server)
    body = {
        "model": MODEL_NAME,
        "prompt": LONG_PROMPT,
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.Client(timeout=30) as http:
        for _ in range(4):
            with http.stream("POST", f"{server.v1}/completions", json=body) as response:
                assert response.status_code == 200
                lines = response.iter_lines()
                first = next(line for line in lines if line.startswith("data: "))
                assert json.loads(first.removeprefix("data: "))["object"] == "text_completion"
            # leaving the block closes the connection mid-stream
    metrics = server.wait_idle()
    assert metrics["promptcache_engine_kv_cache_free_blocks"] == NUM_BLOCKS
    assert metrics["promptcache_engine_requests_in_flight"] == 0
    assert _aborts(server) == before + 4


def test_disconnected_non_streaming_request_is_aborted(server: Server) -> None:
    server.wait_idle()
    before = _aborts(server)
    body = {"model": MODEL_NAME, "prompt": LONG_PROMPT, "max_tokens": 440, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.v1}/completions", json=body, timeout=httpx.Timeout(30, read=0.3))
    metrics = server.wait_idle()
    assert metrics["promptcache_engine_kv_cache_free_blocks"] == NUM_BLOCKS
    assert _aborts(server) == before + 1
