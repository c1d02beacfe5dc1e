"""``Usage.raw`` is an independent copy of the vendor's usage object, equal to
``copy.deepcopy(dict(usage))`` (the reference), whatever extra fields the vendor sends: JSON
values, SDK-style objects, tuples, cycles; the streaming merge keeps its own copies too."""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.usage import Usage, parse_usage, stream_accumulator

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)
_extra_fields = st.dictionaries(
    st.text(max_size=8).map(lambda k: "x_" + k),  # never a usage field name
    _json | st.sampled_from([(1, [2]), OrderedDict(a=[1]), frozenset({1})]),
    max_size=5,
)


def _same_value(a: Any, b: Any) -> bool:
    """Equal, with the same types at every node (1 is not 1.0 or True here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(extra=_extra_fields, nested=_json)
def test_raw_equals_the_deepcopy_reference_and_is_independent(
    extra: dict[str, Any], nested: Any
) -> None:
    payload = {
        "prompt_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 64, "xs": [nested]},
        **extra,
    }
    before = copy.deepcopy(payload)
    usage = Usage.from_openai_chat(payload)
    assert _same_value(usage.raw, copy.deepcopy(dict(payload)))
    assert usage.cache_read_tokens == 64
    usage.raw["prompt_tokens_details"]["xs"].append("changed")
    usage.raw["prompt_tokens_details"]["cached_tokens"] = 0
    assert _same_value(payload, before)


def test_raw_of_a_cyclic_usage_object_is_copied_as_deepcopy_does() -> None:
    payload: dict[str, Any] = {"input_tokens": 5, "output_tokens": 2, "meta": {"n": [1]}}
    payload["meta"]["self"] = payload["meta"]
    usage = Usage.from_anthropic(payload)
    assert usage.raw["meta"]["self"] is usage.raw["meta"]
    assert usage.raw["meta"] is not payload["meta"]
    assert usage.uncached_input_tokens == 5


def test_stream_merge_keeps_copies_of_the_events() -> None:
    start = {
        "type": "message_start",
        "message": {
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 90,
                "cache_creation": {"ephemeral_5m_input_tokens": 4, "ephemeral_1h_input_tokens": 0},
                "output_tokens": 1,
            }
        },
    }
    delta = {"type": "message_delta", "usage": {"output_tokens": 33}}
    events = [json.loads(json.dumps(e)) for e in (start, delta)]
    acc = stream_accumulator("anthropic")
    for event in events:
        acc.feed(event)
    events[0]["message"]["usage"]["cache_creation"]["ephemeral_5m_input_tokens"] = 999
    usage = acc.result()
    assert usage is not None
    direct = parse_usage(
        "anthropic",
        {"usage": {**start["message"]["usage"], "output_tokens": 33}},  # type: ignore[index]
    )
    assert usage == direct
    assert usage.raw == direct.raw
    assert usage.raw["cache_creation"]["ephemeral_5m_input_tokens"] == 4
