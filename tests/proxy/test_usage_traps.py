"""Every vendor usage trap, through the proxy, streaming and not: the rows must be identical.

The official ``anthropic`` and ``openai`` clients (Gemini: raw httpx) talk to the proxy, which
forwards to the mock upstream replaying the recorded vendor bodies in tests/data/vendors. The
expected buckets are worked out by hand from those files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from proxy_support import RunningProxy

from promptcache.tokens import count_tokens
from promptcache.usage import USAGE_TOKEN_COLUMNS

ANTHROPIC_KEY = "sk-ant-api03-test-key-0123456789abcdef"
OPENAI_KEY = "sk-proj-test-key-0123456789abcdefgh"
GOOGLE_KEY = "AIzaSyTest-0123456789abcdefghijklmnopq"

SYSTEM = "You are a careful SQL reviewer. " * 20


@dataclass(frozen=True)
class Case:
    api: str
    case: str
    model: str
    # uncached, cache read, write 5m, write 1h, write unknown, output, reasoning
    buckets: tuple[int, int, int, int, int, int, int]
    priced: bool = True
    warns: bool = False


CASES = [
    # Anthropic: cache tokens beside input_tokens, TTL split in cache_creation
    Case(
        "anthropic",
        "cache_read_and_write_5m",
        "claude-haiku-4-5",
        (1532, 10240, 2048, 0, 0, 220, 0),
    ),
    Case("anthropic", "cache_write_1h", "claude-sonnet-4-5", (21, 0, 0, 188086, 0, 393, 0)),
    # no TTL split: the flat cache_creation_input_tokens has an unknown TTL, flagged
    Case(
        "anthropic",
        "no_ttl_split",
        "claude-3-7-sonnet-20250219",
        (12, 0, 0, 0, 4096, 88, 0),
        warns=True,
    ),
    # message_delta repeats input and cache counts cumulatively: never summed
    Case(
        "anthropic",
        "server_tool_cumulative_delta",
        "claude-opus-4-5",
        (10682, 2048, 0, 0, 0, 510, 0),
    ),
    # OpenAI Chat: cached_tokens inside prompt_tokens
    Case("openai_chat", "cached", "gpt-4o-2024-08-06", (86, 1920, 0, 0, 0, 300, 0)),
    # GPT-5.6 cache_write_tokens, also inside prompt_tokens; reasoning inside completion
    Case(
        "openai_chat", "reasoning_cache_write", "gpt-5.6-terra", (2712, 8192, 0, 0, 4096, 1200, 896)
    ),
    # DeepSeek's own field names; no price row: cost stays NULL, never 0
    Case(
        "openai_chat",
        "deepseek_cache_hit",
        "deepseek-chat",
        (120, 1280, 0, 0, 0, 52, 0),
        priced=False,
    ),
    # Responses: cached_tokens inside input_tokens
    Case("openai_responses", "cached", "gpt-4.1", (129, 11904, 0, 0, 0, 44, 0)),
    Case("openai_responses", "reasoning", "gpt-5", (342, 3968, 0, 0, 0, 742, 512)),
    Case(
        "openai_completions",
        "cached",
        "gpt-3.5-turbo-instruct",
        (64, 1024, 0, 0, 0, 16, 0),
        priced=False,
    ),
    # Gemini: cachedContentTokenCount inside promptTokenCount; thoughts billed as output
    Case(
        "gemini", "implicit_cache_thinking", "gemini-2.5-flash", (1187, 11264, 0, 0, 0, 1360, 1048)
    ),
    # Gemini: toolUsePromptTokenCount is extra input
    Case("gemini", "tool_use_prompt", "gemini-2.5-pro", (735, 0, 0, 0, 0, 210, 0)),
]

BUCKETS = (*USAGE_TOKEN_COLUMNS, "reasoning_tokens")
#: Columns that differ between two requests by design: identity, timing, and the cache-break
#: columns, which compare each request with the one before it.
PER_REQUEST = {
    *("id", "started_at", "first_byte_at", "ended_at", "ttft_ms", "latency_ms", "stream"),
    *("break_reason", "break_segment", "break_offset", "break_excerpt", "previous_request_id"),
    *("expected_hit", "unexpected_miss"),
}


def call_anthropic(url: str, case: Case, stream: bool, **extra: Any) -> None:
    with anthropic.Anthropic(base_url=url, api_key=ANTHROPIC_KEY, max_retries=0) as client:
        kwargs: dict[str, Any] = {
            "model": case.model,
            "max_tokens": 512,
            "system": [
                {
                    "type": "text",
                    "text": SYSTEM,
                    "cache_control": {"type": "ephemeral", "ttl": "1h"},
                }
            ],
            "messages": [{"role": "user", "content": "Review: SELECT * FROM orders"}],
            "extra_headers": {"x-mock-case": case.case},
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        assert message.usage.output_tokens == case.buckets[5]


def call_openai(url: str, case: Case, stream: bool, **extra: Any) -> None:
    headers = {"x-mock-case": case.case}
    with openai.OpenAI(base_url=url + "/v1", api_key=OPENAI_KEY, max_retries=0) as client:
        if case.api == "openai_chat":
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Review: SELECT * FROM orders"},
            ]
            if stream:
                chunks = list(
                    client.chat.completions.create(
                        model=case.model,
                        messages=messages,  # type: ignore[arg-type]
                        stream=True,
                        extra_headers=headers,
                        **extra,
                    )
                )
                # usage reaches the client only when it asked for it
                asked = bool(extra.get("stream_options"))
                assert (chunks[-1].usage is not None) is asked
                assert all(chunk.choices for chunk in chunks) is not asked
            else:
                reply = client.chat.completions.create(
                    model=case.model,
                    messages=messages,  # type: ignore[arg-type]
                    extra_headers=headers,
                )
                assert reply.usage is not None
        elif case.api == "openai_responses":
            if stream:
                events = list(
                    client.responses.create(
                        model=case.model,
                        instructions=SYSTEM,
                        input="Review",
                        stream=True,
                        extra_headers=headers,
                    )
                )
                assert events[-1].type == "response.completed"
            else:
                client.responses.create(
                    model=case.model, instructions=SYSTEM, input="Review", extra_headers=headers
                )
        else:
            result = client.completions.create(
                model=case.model, prompt=SYSTEM, stream=stream, extra_headers=headers
            )
            if stream:
                list(result)  # type: ignore[arg-type]


def call_gemini(url: str, case: Case, stream: bool, **extra: Any) -> None:
    body = {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": "Review: SELECT * FROM orders"}]}],
    }
    action = "streamGenerateContent" if stream else "generateContent"
    query = "?alt=sse" if stream and not extra.get("json_array") else ""
    response = httpx.post(
        f"{url}/v1beta/models/{case.model}:{action}{query}",
        json=body,
        headers={"x-goog-api-key": GOOGLE_KEY, "x-mock-case": case.case},
        timeout=10,
    )
    assert response.status_code == 200, response.text


CALLERS: dict[str, Callable[..., None]] = {
    "anthropic": call_anthropic,
    "openai_chat": call_openai,
    "openai_responses": call_openai,
    "openai_completions": call_openai,
    "gemini": call_gemini,
}


def variants(case: Case) -> list[dict[str, Any]]:
    """Ways to send the same request: plain, streamed, and the api's streaming twins."""
    out: list[dict[str, Any]] = [{"stream": False}, {"stream": True}]
    if case.api == "openai_chat":
        out.append({"stream": True, "stream_options": {"include_usage": True}})
    if case.api == "gemini":
        out.append({"stream": True, "json_array": True})
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.api}-{c.case}")
def test_stream_and_non_stream_rows_are_identical(
    start_proxy: Callable[..., RunningProxy], case: Case
) -> None:
    proxy = start_proxy()
    ways = variants(case)
    for way in ways:
        options = dict(way)
        CALLERS[case.api](proxy.url, case, options.pop("stream"), **options)
    rows = proxy.rows(len(ways))
    assert [r["stream"] for r in rows] == [int(w["stream"]) for w in ways]

    first = rows[0]
    assert tuple(first[b] for b in BUCKETS) == case.buckets
    assert first["total_input_tokens"] == sum(case.buckets[:5])
    assert first["status"] == 200 and first["error"] is None
    assert first["model"] == case.model
    assert first["api"] == case.api
    assert bool(json.loads(first["usage_warnings"])) is case.warns
    assert json.loads(first["usage_json"])  # the raw vendor usage is kept
    if case.priced:
        assert float(first["cost_usd"]) > 0
        assert float(first["cost_without_cache_usd"]) > 0
    else:
        assert first["cost_usd"] is None and first["cost_without_cache_usd"] is None
    assert first["prefix_hash"] and json.loads(first["segment_hashes"])
    per_request = PER_REQUEST | ({"route"} if case.api == "gemini" else set())  # :action
    for other in rows[1:]:
        differing = {k for k in first if first[k] != other[k]} - per_request
        assert not differing, {k: (first[k], other[k]) for k in differing}


def test_anthropic_breakpoints_and_segments_are_recorded(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    call_anthropic(proxy.url, CASES[0], stream=False)
    row = proxy.row()
    assert json.loads(row["breakpoints"]) == [{"path": "system[0]", "ttl": "1h"}]
    segments = json.loads(row["segment_hashes"])
    assert [s["path"] for s in segments] == ["system[0]", "messages[0]"]
    assert [s["kind"] for s in segments] == ["system", "messages"]
    assert row["first_segment_hash"] == segments[0]["sha256"]
    assert row["approx_prefix_tokens"] > 100
    # each segment's own token count (the page's break strip draws widths by it)
    texts = [SYSTEM, "Review: SELECT * FROM orders"]
    assert [s["num_tokens"] for s in segments] == [count_tokens(t) for t in texts]
    assert sum(s["num_tokens"] for s in segments) == row["approx_prefix_tokens"]
    assert row["key_fingerprint"] and len(row["key_fingerprint"]) == 16
