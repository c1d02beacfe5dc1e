"""Usage normalisation: recorded vendor bodies and streams, every vendor trap, properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptcache.errors import ConfigError, UsageParseError
from promptcache.usage import (
    VENDOR_APIS,
    Usage,
    detect_api,
    parse_usage,
    stream_accumulator,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "vendors"

# (uncached, cache_read, write_5m, write_1h, write_unknown, output, reasoning, num_warnings);
# None: the response carries no usage.
EXPECTED: dict[tuple[str, str], tuple[int, ...] | None] = {
    ("anthropic", "cache_write_1h"): (21, 0, 0, 188086, 0, 393, 0, 0),
    ("anthropic", "cache_read_and_write_5m"): (1532, 10240, 2048, 0, 0, 220, 0, 0),
    ("anthropic", "no_ttl_split"): (12, 0, 0, 0, 4096, 88, 0, 1),
    ("anthropic", "server_tool_cumulative_delta"): (10682, 2048, 0, 0, 0, 510, 0, 0),
    ("openai_chat", "cached"): (86, 1920, 0, 0, 0, 300, 0, 0),
    ("openai_chat", "deepseek_cache_hit"): (120, 1280, 0, 0, 0, 52, 0, 0),
    ("openai_chat", "reasoning_cache_write"): (2712, 8192, 0, 0, 4096, 1200, 896, 0),
    ("openai_chat", "no_usage"): None,
    ("openai_completions", "cached"): (64, 1024, 0, 0, 0, 16, 0, 0),
    ("openai_responses", "cached"): (129, 11904, 0, 0, 0, 44, 0, 0),
    ("openai_responses", "reasoning"): (342, 3968, 0, 0, 0, 742, 512, 0),
    ("gemini", "implicit_cache_thinking"): (1187, 11264, 0, 0, 0, 1360, 1048, 0),
    ("gemini", "tool_use_prompt"): (735, 0, 0, 0, 0, 210, 0, 0),
    ("bedrock_converse", "cache_write_1h"): (14, 0, 0, 5116, 0, 231, 0, 0),
    ("bedrock_converse", "cache_read_and_write_5m"): (37, 5116, 1024, 0, 0, 95, 0, 0),
}
CASES = sorted(EXPECTED)


def sse_events(text: str) -> list[dict[str, Any]]:
    """Parse SSE text (LF or CRLF framing) into the JSON objects of its ``data:`` fields."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if data and data != ["[DONE]"]:
            events.append(json.loads("\n".join(data)))
    return events


def stream_events(api: str, case: str) -> list[dict[str, Any]]:
    if api == "bedrock_converse":
        lines = (DATA / api / f"{case}.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]
    return sse_events((DATA / api / f"{case}.sse").read_text(encoding="utf-8"))


def body(api: str, case: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / api / f"{case}.json").read_text(encoding="utf-8"))
    return loaded


def buckets(u: Usage) -> tuple[int, ...]:
    return (
        u.uncached_input_tokens,
        u.cache_read_tokens,
        u.cache_write_5m_tokens,
        u.cache_write_1h_tokens,
        u.cache_write_unknown_tokens,
        u.output_tokens,
        u.reasoning_tokens,
        len(u.warnings),
    )


def vendor_total_input(api: str, raw: dict[str, Any]) -> int:
    """Each vendor's own definition of total input, written independently of usage.py."""
    if api == "anthropic":
        return int(
            raw["input_tokens"]
            + raw.get("cache_creation_input_tokens", 0)
            + raw.get("cache_read_input_tokens", 0)
        )
    if api in ("openai_chat", "openai_completions"):
        return int(raw["prompt_tokens"])
    if api == "openai_responses":
        return int(raw["input_tokens"])
    if api == "gemini":
        return int(raw.get("promptTokenCount", 0) + raw.get("toolUsePromptTokenCount", 0))
    return int(
        raw["inputTokens"]
        + raw.get("cacheReadInputTokens", 0)
        + raw.get("cacheWriteInputTokens", 0)
    )


def test_every_recorded_file_has_an_expectation() -> None:
    on_disk = {
        (p.parent.name, p.stem) for p in DATA.glob("*/*") if p.suffix in (".json", ".sse", ".jsonl")
    }
    assert on_disk == set(EXPECTED)
    assert {api for api, _ in EXPECTED} == set(VENDOR_APIS)


@pytest.mark.parametrize(("api", "case"), CASES)
def test_recorded_body_parses_to_expected_buckets(api: str, case: str) -> None:
    usage = parse_usage(api, body(api, case))
    expected = EXPECTED[(api, case)]
    if expected is None:
        assert usage is None
        return
    assert usage is not None
    assert buckets(usage) == expected, usage
    assert usage.vendor == api


@pytest.mark.parametrize(("api", "case"), [c for c in CASES if EXPECTED[c] is not None])
def test_buckets_sum_to_vendor_total_input(api: str, case: str) -> None:
    usage = parse_usage(api, body(api, case))
    assert usage is not None
    assert usage.total_input_tokens == vendor_total_input(api, usage.raw)
    total = usage.raw.get("total_tokens", usage.raw.get("totalTokenCount"))
    total = usage.raw.get("totalTokens", total)
    if total is not None:  # every vendor's total = all input + all output
        assert usage.total_input_tokens + usage.output_tokens == total


@pytest.mark.parametrize(("api", "case"), CASES)
def test_stream_and_non_stream_give_identical_usage(api: str, case: str) -> None:
    accumulator = stream_accumulator(api)
    for event in stream_events(api, case):
        accumulator.feed(event)
    streamed = accumulator.result()
    direct = parse_usage(api, body(api, case))
    assert streamed == direct
    if direct is not None and streamed is not None:
        assert streamed.raw == direct.raw
        assert streamed.warnings == direct.warnings


@pytest.mark.parametrize(("api", "case"), CASES)
def test_detect_api_recognises_recorded_bodies(api: str, case: str) -> None:
    assert detect_api(body(api, case)) == api


# -- Anthropic traps --------------------------------------------------------------------------


def test_anthropic_cache_tokens_sit_beside_input_tokens() -> None:
    u = Usage.from_anthropic(
        {"input_tokens": 50, "cache_read_input_tokens": 1000, "output_tokens": 5}
    )
    assert (u.uncached_input_tokens, u.cache_read_tokens, u.total_input_tokens) == (50, 1000, 1050)
    assert u.hit_rate == pytest.approx(1000 / 1050)


def test_anthropic_missing_ttl_split_is_unknown_with_warning() -> None:
    u = Usage.from_anthropic({"input_tokens": 3, "cache_creation_input_tokens": 900})
    assert u.cache_write_unknown_tokens == 900
    assert u.cache_write_5m_tokens == u.cache_write_1h_tokens == 0
    assert len(u.warnings) == 1 and "TTL split" in u.warnings[0]


def test_anthropic_split_smaller_than_flat_total_keeps_remainder_as_unknown() -> None:
    u = Usage.from_anthropic(
        {
            "input_tokens": 1,
            "cache_creation_input_tokens": 1000,
            "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 100},
        }
    )
    assert (u.cache_write_5m_tokens, u.cache_write_1h_tokens) == (600, 100)
    assert u.cache_write_unknown_tokens == 300
    assert len(u.warnings) == 1


def test_anthropic_split_larger_than_flat_total_uses_split() -> None:
    u = Usage.from_anthropic(
        {
            "input_tokens": 1,
            "cache_creation_input_tokens": 10,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 40},
        }
    )
    assert (u.cache_write_1h_tokens, u.cache_write_unknown_tokens) == (40, 0)
    assert len(u.warnings) == 1


def test_anthropic_split_without_flat_total() -> None:
    u = Usage.from_anthropic(
        {"input_tokens": 1, "cache_creation": {"ephemeral_1h_input_tokens": 40}}
    )
    assert (u.cache_write_1h_tokens, u.warnings) == (40, ())


def test_anthropic_stream_keeps_latest_value_never_sums() -> None:
    acc = stream_accumulator("anthropic")
    acc.feed(
        {
            "type": "message_start",
            "message": {
                "usage": {"input_tokens": 400, "cache_read_input_tokens": 0, "output_tokens": 1}
            },
        }
    )
    acc.feed(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
    )
    acc.feed({"type": "message_delta", "usage": {"output_tokens": 10}})
    acc.feed({"type": "message_delta", "usage": {"output_tokens": 25, "input_tokens": 400}})
    acc.feed(
        {"type": "message_delta", "usage": {"output_tokens": None, "cache_read_input_tokens": None}}
    )
    usage = acc.result()
    assert usage is not None
    assert (usage.uncached_input_tokens, usage.output_tokens, usage.cache_read_tokens) == (
        400,
        25,
        0,
    )


def test_anthropic_thinking_tokens_are_the_reasoning_part_of_the_output() -> None:
    """Anthropic reports thinking in usage.output_tokens_details.thinking_tokens (a part of
    output_tokens, as the official client's Usage type says); it was read as 0."""
    body = {
        "input_tokens": 30,
        "output_tokens": 2820,
        "output_tokens_details": {"thinking_tokens": 1240},
    }
    u = Usage.from_anthropic(body)
    assert (u.output_tokens, u.reasoning_tokens, u.warnings) == (2820, 1240, ())
    acc = stream_accumulator("anthropic")  # message_start, then the cumulative message_delta
    acc.feed(
        {"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}}
    )
    acc.feed(
        {
            "type": "message_delta",
            "usage": {"output_tokens": 2820, "output_tokens_details": {"thinking_tokens": 1240}},
        }
    )
    assert acc.result() == u
    assert Usage.from_anthropic({"input_tokens": 1, "output_tokens": 2}).reasoning_tokens == 0


def test_anthropic_stream_without_usage_events_gives_none() -> None:
    acc = stream_accumulator("anthropic")
    acc.feed({"type": "ping"})
    acc.feed({"type": "message_stop"})
    assert acc.result() is None


# -- OpenAI / DeepSeek traps -----------------------------------------------------------------


def test_openai_chat_prompt_tokens_include_cached_and_written_tokens() -> None:
    u = Usage.from_openai_chat(
        {
            "prompt_tokens": 5000,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 3000, "cache_write_tokens": 1500},
        }
    )
    assert (u.uncached_input_tokens, u.cache_read_tokens, u.cache_write_unknown_tokens) == (
        500,
        3000,
        1500,
    )
    assert u.total_input_tokens == 5000 and u.warnings == ()


def test_openai_inconsistent_counts_clamp_to_zero_and_keep_raw() -> None:
    raw = {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 128}}
    u = Usage.from_openai_chat(raw)
    assert (u.uncached_input_tokens, u.cache_read_tokens) == (0, 128)
    assert len(u.warnings) == 1 and "exceed" in u.warnings[0]
    assert u.raw == raw


def test_null_details_are_treated_as_absent() -> None:
    u = Usage.from_openai_chat(
        {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None}
    )
    assert (u.uncached_input_tokens, u.cache_read_tokens) == (10, 0)


def test_deepseek_hit_miss_mismatch_is_flagged() -> None:
    u = Usage.from_openai_chat(
        {"prompt_tokens": 100, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 30}
    )
    assert (u.uncached_input_tokens, u.cache_read_tokens) == (36, 64)
    assert len(u.warnings) == 1


def test_openai_responses_input_includes_cached_and_reasoning_is_output() -> None:
    u = Usage.from_openai_responses(
        {
            "input_tokens": 900,
            "input_tokens_details": {"cached_tokens": 768},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 256},
        }
    )
    assert (u.uncached_input_tokens, u.cache_read_tokens) == (132, 768)
    assert (u.output_tokens, u.reasoning_tokens) == (300, 256)


def test_chat_stream_without_include_usage_gives_none() -> None:
    acc = stream_accumulator("openai_chat")
    for event in stream_events("openai_chat", "no_usage"):
        acc.feed(event)
    assert acc.result() is None


# -- Gemini / Bedrock traps ------------------------------------------------------------------


def test_gemini_prompt_includes_cached_and_thoughts_are_output() -> None:
    u = Usage.from_gemini(
        {
            "promptTokenCount": 5000,
            "cachedContentTokenCount": 4096,
            "candidatesTokenCount": 20,
            "thoughtsTokenCount": 100,
        }
    )
    assert (u.uncached_input_tokens, u.cache_read_tokens) == (904, 4096)
    assert (u.output_tokens, u.reasoning_tokens) == (120, 100)
    assert u.cache_write_tokens == 0


def test_gemini_accepts_python_sdk_snake_case() -> None:
    camel = Usage.from_gemini({"promptTokenCount": 50, "cachedContentTokenCount": 10})
    snake = Usage.from_gemini({"prompt_token_count": 50, "cached_content_token_count": 10})
    assert camel == snake


def test_gemini_omitted_zero_counts_are_zero() -> None:
    u = Usage.from_gemini({"promptTokenCount": 7, "totalTokenCount": 7})
    assert (u.uncached_input_tokens, u.output_tokens) == (7, 0)


def test_bedrock_input_excludes_cache_tokens_and_ttl_split() -> None:
    u = Usage.from_bedrock_converse(
        {
            "inputTokens": 10,
            "outputTokens": 4,
            "cacheReadInputTokens": 200,
            "cacheWriteInputTokens": 300,
            "cacheDetails": [{"inputTokens": 100, "ttl": "1h"}, {"inputTokens": 200, "ttl": "5m"}],
        }
    )
    assert buckets(u) == (10, 200, 200, 100, 0, 4, 0, 0)
    assert u.total_input_tokens == 510


def test_bedrock_without_cache_details_is_unknown_ttl() -> None:
    u = Usage.from_bedrock_converse(
        {"inputTokens": 1, "outputTokens": 1, "cacheWriteInputTokens": 64}
    )
    assert u.cache_write_unknown_tokens == 64 and len(u.warnings) == 1


def test_bedrock_unknown_ttl_entry_is_unknown_with_warning() -> None:
    u = Usage.from_bedrock_converse(
        {
            "inputTokens": 1,
            "cacheWriteInputTokens": 96,
            "cacheDetails": [{"inputTokens": 64, "ttl": "5m"}, {"inputTokens": 32, "ttl": "24h"}],
        }
    )
    assert (u.cache_write_5m_tokens, u.cache_write_unknown_tokens) == (64, 32)
    # The entry is part of the total's split: one warning, its 32 tokens counted once.
    assert u.warnings == (
        "cacheDetails[1] has unknown ttl '24h'; its 32 tokens counted as "
        "cache_write_unknown_tokens",
    )


def test_bedrock_unknown_ttl_entry_counts_without_a_total() -> None:
    u = Usage.from_bedrock_converse(
        {"inputTokens": 1, "cacheDetails": [{"inputTokens": 50, "ttl": "2h"}]}
    )
    assert u.cache_write_unknown_tokens == 50 and u.total_input_tokens == 51
    assert u.warnings == (
        "cacheDetails[0] has unknown ttl '2h'; its 50 tokens counted as cache_write_unknown_tokens",
    )


def test_bedrock_total_beyond_a_split_with_unknown_ttl_counts_only_the_rest() -> None:
    u = Usage.from_bedrock_converse(
        {
            "inputTokens": 1,
            "cacheWriteInputTokens": 90,
            "cacheDetails": [{"inputTokens": 30, "ttl": "5m"}, {"inputTokens": 50, "ttl": "2h"}],
        }
    )
    assert (u.cache_write_5m_tokens, u.cache_write_unknown_tokens) == (30, 60)
    assert u.warnings[1] == (
        "cacheWriteInputTokens=90 exceeds its TTL split (30 + 0 + 50 of unknown ttl); the "
        "remaining 10 also counted as cache_write_unknown_tokens"
    )


def test_bedrock_stream_accepts_decoded_event_stream_payload() -> None:
    usage = {"inputTokens": 5, "outputTokens": 6, "totalTokens": 11}
    acc = stream_accumulator("bedrock_converse")
    acc.feed({"contentBlockDelta": {"delta": {"text": "hi"}, "contentBlockIndex": 0}})
    acc.feed({"usage": usage, "metrics": {"latencyMs": 10}})
    assert acc.result() == Usage.from_bedrock_converse(usage)


# -- garbage in -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "payload"),
    [
        ("anthropic", "not a dict"),
        ("anthropic", {}),
        ("anthropic", {"input_tokens": "12"}),
        ("anthropic", {"input_tokens": True}),
        ("anthropic", {"input_tokens": 1.5}),
        ("anthropic", {"input_tokens": 1, "cache_creation": 5}),
        ("openai_chat", {"completion_tokens": 3}),
        ("openai_chat", {"prompt_tokens": 3, "prompt_tokens_details": [1]}),
        ("openai_responses", {"output_tokens": 3}),
        ("gemini", {}),
        ("gemini", {"modelVersion": "gemini-2.5-flash"}),
        ("bedrock_converse", {"outputTokens": 3}),
        ("bedrock_converse", {"inputTokens": 3, "cacheDetails": {"ttl": "5m"}}),
        ("bedrock_converse", {"inputTokens": 3, "cacheDetails": [{"ttl": "5m"}]}),
    ],
)
def test_garbage_raises_usage_parse_error(api: str, payload: Any) -> None:
    parser = {
        "anthropic": Usage.from_anthropic,
        "openai_chat": Usage.from_openai_chat,
        "openai_responses": Usage.from_openai_responses,
        "gemini": Usage.from_gemini,
        "bedrock_converse": Usage.from_bedrock_converse,
    }[api]
    with pytest.raises(UsageParseError):
        parser(payload)


def test_integral_floats_are_accepted() -> None:
    assert Usage.from_anthropic({"input_tokens": 12.0}).uncached_input_tokens == 12


def test_negative_counts_clamp_with_warning() -> None:
    u = Usage.from_anthropic({"input_tokens": -5, "output_tokens": 3})
    assert (u.uncached_input_tokens, u.output_tokens) == (0, 3)
    assert "negative" in u.warnings[0]


def test_a_negative_gemini_count_is_warned_about_once() -> None:
    """Gemini's counts were read twice (once to see that any is present), so each negative one
    gave the same warning twice."""
    u = Usage.from_gemini({"promptTokenCount": -1, "candidatesTokenCount": -2})
    assert u.warnings == (
        "promptTokenCount was negative (-1); counted as 0",
        "candidatesTokenCount was negative (-2); counted as 0",
    )
    u = Usage.from_gemini({"prompt_token_count": 10, "total_token_count": -3})
    assert u.warnings == ("total_token_count was negative (-3); counted as 0",)
    assert u.uncached_input_tokens == 10


def test_reasoning_above_the_output_is_clamped_with_a_warning() -> None:
    """reasoning_tokens is the part of output_tokens spent on reasoning; a usage object saying
    50 of 5 output tokens were reasoning was kept as is, without a word."""
    u = Usage.from_openai_chat(
        {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "completion_tokens_details": {"reasoning_tokens": 50},
        }
    )
    assert (u.output_tokens, u.reasoning_tokens) == (5, 5)
    assert u.warnings == (
        "reasoning tokens (50) exceed the output tokens (5) they are part of; "
        "reasoning counted as 5",
    )
    u = Usage.from_openai_responses(
        {"input_tokens": 10, "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 3}}
    )
    assert (u.output_tokens, u.reasoning_tokens) == (0, 0) and len(u.warnings) == 1
    ok = Usage.from_openai_chat(
        {
            "prompt_tokens": 1,
            "completion_tokens": 5,
            "completion_tokens_details": {"reasoning_tokens": 5},
        }
    )
    assert (ok.reasoning_tokens, ok.warnings) == (5, ())


def test_absurd_counts_are_rejected_not_stored() -> None:
    # 2**64 cannot be stored in SQLite and a few 2**62 overflow a SUM over the log
    with pytest.raises(UsageParseError, match="more than any request can hold"):
        Usage.from_anthropic({"input_tokens": 2**64, "output_tokens": 3})
    limit = Usage.from_anthropic({"input_tokens": 2**40, "output_tokens": 3})
    assert limit.uncached_input_tokens == 2**40


def test_parse_usage_errors() -> None:
    with pytest.raises(ConfigError, match="unknown api"):
        parse_usage("openai", {"usage": {}})
    with pytest.raises(UsageParseError):
        parse_usage("anthropic", [])  # type: ignore[arg-type]
    with pytest.raises(UsageParseError):
        parse_usage("anthropic", {"usage": 12})
    assert (
        parse_usage("anthropic", {"type": "error", "error": {"type": "overloaded_error"}}) is None
    )
    with pytest.raises(ConfigError):
        stream_accumulator("vertex")


def test_stream_accumulator_rejects_non_object_events() -> None:
    for api in VENDOR_APIS:
        with pytest.raises(UsageParseError):
            stream_accumulator(api).feed("data: {}")  # type: ignore[arg-type]


def test_usage_direct_construction_is_validated() -> None:
    with pytest.raises(UsageParseError):
        Usage(vendor="anthropic", output_tokens=-1)
    with pytest.raises(UsageParseError):
        Usage(vendor="mistral")
    assert Usage(vendor="gemini").hit_rate == 0.0
    # what the parsers refuse or clamp, the constructor refused not: Usage(uncached_input_tokens
    # =10**30) was priced at $6e24, and 5 reasoning tokens of 1 output token were kept
    with pytest.raises(UsageParseError, match=r"more than any request can hold"):
        Usage(vendor="anthropic", uncached_input_tokens=10**30)
    assert Usage(vendor="anthropic", cache_read_tokens=2**40).total_input_tokens == 2**40
    with pytest.raises(
        UsageParseError, match=r"reasoning_tokens \(5\) is the part of output_tokens"
    ):
        Usage(vendor="openai_chat", output_tokens=1, reasoning_tokens=5)


def test_equality_ignores_raw_and_usage_is_hashable() -> None:
    a = Usage(vendor="anthropic", uncached_input_tokens=3, raw={"input_tokens": 3})
    b = Usage(vendor="anthropic", uncached_input_tokens=3, raw={"input_tokens": 3, "x": None})
    assert a == b and hash(a) == hash(b)


# -- detect_api on bare usage objects -----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "api"),
    [
        ({"input_tokens": 1, "cache_read_input_tokens": 0, "output_tokens": 2}, "anthropic"),
        ({"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}}, "openai_responses"),
        ({"prompt_tokens": 1, "completion_tokens": 2}, "openai_chat"),
        ({"promptTokenCount": 1}, "gemini"),
        ({"inputTokens": 1, "outputTokens": 2}, "bedrock_converse"),
        ({"usage": {"prompt_tokens": 1}}, "openai_chat"),
        # Anthropic reports thinking in output_tokens_details too: with its cache fields beside
        # it this was refused as ambiguous, and alone it was taken for Responses (whose
        # output_tokens_details holds reasoning_tokens), which counts cache tokens inside input
        (
            {
                "input_tokens": 10,
                "cache_read_input_tokens": 100,
                "output_tokens": 50,
                "output_tokens_details": {"thinking_tokens": 30},
            },
            "anthropic",
        ),
        (
            {
                "input_tokens": 1,
                "output_tokens": 5,
                "output_tokens_details": {"thinking_tokens": 3},
            },
            "anthropic",
        ),
        (
            {
                "input_tokens": 1,
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 3},
            },
            "openai_responses",
        ),
    ],
)
def test_detect_api_on_bare_usage(payload: dict[str, Any], api: str) -> None:
    assert detect_api(payload) == api


@pytest.mark.parametrize(
    "payload", [{"input_tokens": 5, "output_tokens": 3}, {"tokens": 5}, {"usage": {"total": 1}}]
)
def test_detect_api_refuses_ambiguous_or_unknown(payload: dict[str, Any]) -> None:
    with pytest.raises(UsageParseError, match="api"):
        detect_api(payload)


# -- properties -----------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=2_000_000)


@given(counts, counts, counts, counts, counts, st.integers(min_value=1, max_value=4))
def test_anthropic_buckets_sum_and_stream_equals_body(
    uncached: int, read: int, w5: int, w1h: int, output: int, num_deltas: int
) -> None:
    usage = {
        "input_tokens": uncached,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": w5 + w1h,
        "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1h},
        "output_tokens": output,
    }
    direct = Usage.from_anthropic(usage)
    assert direct.total_input_tokens == uncached + read + w5 + w1h
    assert direct.warnings == ()
    acc = stream_accumulator("anthropic")
    acc.feed({"type": "message_start", "message": {"usage": {**usage, "output_tokens": 1}}})
    for i in range(1, num_deltas + 1):  # cumulative counts: the last delta carries the total
        acc.feed({"type": "message_delta", "usage": {"output_tokens": output * i // num_deltas}})
    assert acc.result() == direct


@given(counts, counts, counts, counts, counts)
def test_openai_chat_buckets_never_negative(
    prompt: int, cached: int, written: int, completion: int, reasoning: int
) -> None:
    u = Usage.from_openai_chat(
        {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
    )
    consistent = cached + written <= prompt
    assert (u.warnings == ()) == (consistent and reasoning <= completion)
    if consistent:
        assert u.total_input_tokens == prompt
    assert min(buckets(u)) >= 0
    assert u.reasoning_tokens == min(reasoning, completion)


@given(counts, counts, counts, counts, counts)
def test_gemini_buckets_sum_to_prompt_plus_tool_use(
    prompt: int, cached_share: int, candidates: int, thoughts: int, tool_use: int
) -> None:
    cached = cached_share % (prompt + 1)
    u = Usage.from_gemini(
        {
            "promptTokenCount": prompt,
            "cachedContentTokenCount": cached,
            "candidatesTokenCount": candidates,
            "thoughtsTokenCount": thoughts,
            "toolUsePromptTokenCount": tool_use,
            "totalTokenCount": prompt + candidates + thoughts + tool_use,
        }
    )
    assert u.total_input_tokens == prompt + tool_use
    assert u.total_input_tokens + u.output_tokens == u.raw["totalTokenCount"]


@given(counts, counts, counts, counts)
def test_bedrock_buckets_sum_to_vendor_total(uncached: int, read: int, w5: int, w1h: int) -> None:
    details = [{"inputTokens": w1h, "ttl": "1h"}, {"inputTokens": w5, "ttl": "5m"}]
    raw = {
        "inputTokens": uncached,
        "outputTokens": 0,
        "cacheReadInputTokens": read,
        "cacheWriteInputTokens": w5 + w1h,
        "cacheDetails": details,
    }
    u = Usage.from_bedrock_converse(raw)
    assert u.total_input_tokens == vendor_total_input("bedrock_converse", raw)
    assert (u.cache_write_5m_tokens, u.cache_write_1h_tokens, u.warnings) == (w5, w1h, ())


@pytest.mark.parametrize(
    ("api", "payload", "missing"),
    [
        ("anthropic", {"output_tokens": 3}, "input_tokens"),
        ("openai_chat", {"completion_tokens": 3}, "prompt_tokens"),
        ("bedrock_converse", {"outputTokens": 3}, "inputTokens"),
    ],
)
def test_a_missing_required_count_names_the_vendor_in_a_sentence(
    api: str, payload: dict[str, Any], missing: str
) -> None:
    # "does not look like a anthropic usage object": the article was "a" before every vendor
    with pytest.raises(UsageParseError) as caught:
        Usage.from_api(api, payload)
    assert str(caught.value) == (
        f"{api} usage has no {missing!r}: this does not look like {api}'s usage object "
        "(check the --api / api argument)"
    )


def test_the_official_clients_response_objects_are_read_as_their_json() -> None:
    """Usage.from_anthropic(response.usage), parse_usage('anthropic', response) and
    acc.feed(event) with the objects the official clients return were refused ('must be a
    JSON object, got Usage; pass the response's usage object'), though that is what was
    passed; they are read as the JSON the vendor sent."""
    from anthropic.types import (
        Message,
        MessageDeltaUsage,
        RawMessageDeltaEvent,
        RawMessageStartEvent,
    )
    from anthropic.types import Usage as AnthropicUsage
    from openai.types import CompletionUsage

    usage = AnthropicUsage(input_tokens=12, output_tokens=7, cache_read_input_tokens=2048)
    expected = Usage.from_anthropic(
        {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 2048}
    )
    assert Usage.from_anthropic(usage) == expected
    message = Message(
        id="m", type="message", role="assistant", model="claude-sonnet-4-5", content=[],
        stop_reason="end_turn", stop_sequence=None, usage=usage,
    )  # fmt: skip
    assert parse_usage("anthropic", message) == expected
    assert detect_api(message) == "anthropic"
    acc = stream_accumulator("anthropic")
    start = usage.model_copy(update={"output_tokens": 1})
    acc.feed(
        RawMessageStartEvent(
            type="message_start", message=message.model_copy(update={"usage": start})
        )
    )
    acc.feed(
        RawMessageDeltaEvent(
            type="message_delta",
            delta={"stop_reason": "end_turn", "stop_sequence": None},
            usage=MessageDeltaUsage(output_tokens=7),
        )
    )
    assert acc.result() == expected
    chat = CompletionUsage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    assert Usage.from_openai_chat(chat).uncached_input_tokens == 10
    assert Usage.from_openai_chat(chat).raw["total_tokens"] == 12
