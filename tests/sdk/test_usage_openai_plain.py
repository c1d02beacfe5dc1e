"""OpenAI-style usage as a plain ``dict`` (what ``json.loads`` gives: the proxy's every request)
is read by a short path; it must give what the general reader gives for the same object, also
for the shapes it leaves to that reader (DeepSeek's fields, cache writes, floats, negatives,
counts that exceed their totals, odd containers). The general reader is reached with the same
object as a read-only mapping that is not a ``dict``."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.errors import UsageParseError
from promptcache.usage import MAX_TOKEN_COUNT, Usage

_count = st.one_of(
    st.integers(min_value=0, max_value=5000),
    st.sampled_from([None, -3, 2.0, 2.5, True, "7", MAX_TOKEN_COUNT, MAX_TOKEN_COUNT + 1]),
)
_maybe = st.one_of(st.just("absent"), _count)


def _details(fields: dict[str, Any]) -> Any:
    return st.one_of(
        st.just("absent"),
        st.none(),
        st.just([1]),
        st.fixed_dictionaries({}, optional=fields),
    )


_usage = st.fixed_dictionaries(
    {},
    optional={
        "prompt_tokens": _count,
        "completion_tokens": _count,
        "total_tokens": _count,
        "prompt_tokens_details": _details({"cached_tokens": _count, "cache_write_tokens": _count}),
        "completion_tokens_details": _details({"reasoning_tokens": _count}),
        "cache_write_tokens": _count,
        "prompt_cache_hit_tokens": _count,
        "prompt_cache_miss_tokens": _count,
    },
).map(lambda d: {k: v for k, v in d.items() if v != "absent"})


def _read(parse: Any, usage: Any) -> tuple[str, Any]:
    try:
        parsed = parse(usage)
    except UsageParseError as exc:
        return "error", str(exc)
    return "usage", (parsed, parsed.raw, parsed.warnings)


@settings(max_examples=600, deadline=None)
@given(usage=_usage)
def test_the_plain_dict_path_gives_what_the_general_reader_gives(usage: dict[str, Any]) -> None:
    for parse in (Usage.from_openai_chat, Usage.from_openai_completions):
        assert _read(parse, usage) == _read(parse, MappingProxyType(usage))


def test_an_engines_usage_takes_the_plain_path_with_its_counts() -> None:
    usage = {
        "prompt_tokens": 300,
        "completion_tokens": 12,
        "total_tokens": 312,
        "prompt_tokens_details": {"cached_tokens": 256},
    }
    parsed = Usage.from_openai_chat(usage)
    assert (parsed.uncached_input_tokens, parsed.cache_read_tokens) == (44, 256)
    assert (parsed.output_tokens, parsed.reasoning_tokens, parsed.warnings) == (12, 0, ())
    assert parsed.raw == usage and parsed.raw is not usage
    assert parsed.raw["prompt_tokens_details"] is not usage["prompt_tokens_details"]


@pytest.mark.parametrize(
    ("usage", "warning"),
    [
        (
            {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 20}},
            "cached + cache_write tokens (20) exceed prompt_tokens (10)",
        ),
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
            "reasoning tokens (5) exceed the output tokens (2)",
        ),
    ],
)
def test_what_needs_a_warning_still_gets_it(usage: dict[str, Any], warning: str) -> None:
    assert any(w.startswith(warning) for w in Usage.from_openai_chat(usage).warnings)
