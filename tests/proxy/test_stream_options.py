"""Splicing stream_options.include_usage into a chat request without re-serialising it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.proxy.sse import SSEDecoder
from promptcache.proxy.stream_options import (
    drop_injected_usage_chunk,
    inject_include_usage,
    is_injected_usage_chunk,
    needs_include_usage,
)


def inject(raw: str) -> str | None:
    out = inject_include_usage(raw.encode(), json.loads(raw))
    return None if out is None else out.decode()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '{"model": "gpt-4o", "stream": true, "messages": []}',
            '{"stream_options":{"include_usage":true},"model": "gpt-4o", "stream": true, '
            '"messages": []}',
        ),
        (
            '  {\n  "stream": true,\n  "stream_options": null}',
            '  {\n  "stream": true,\n  "stream_options": {"include_usage":true}}',
        ),
        (
            '{"stream": true, "stream_options": {}}',
            '{"stream": true, "stream_options": {"include_usage":true}}',
        ),
        (
            '{"stream": true, "stream_options": { "include_obfuscation": false }}',
            '{"stream": true, "stream_options": {"include_usage":true, "include_obfuscation": '
            "false }}",
        ),
        (
            '{"stream": true, "stream_options": {"include_usage" : false}, "n": 1}',
            '{"stream": true, "stream_options": {"include_usage" : true}, "n": 1}',
        ),
    ],
)
def test_splices_only_the_one_member(raw: str, expected: str) -> None:
    assert inject(raw) == expected
    assert json.loads(expected)["stream_options"]["include_usage"] is True


def test_refuses_when_stream_options_is_not_an_object() -> None:
    assert inject('{"stream": true, "stream_options": "yes"}') is None


def test_non_utf8_body_is_left_alone() -> None:
    raw = json.dumps({"stream": True}).encode("utf-16")
    assert inject_include_usage(raw, {"stream": True}) is None


@pytest.mark.parametrize(
    ("body", "needed"),
    [
        ({"stream": True}, True),
        ({"stream": True, "stream_options": None}, True),
        ({"stream": True, "stream_options": {"include_usage": False}}, True),
        ({"stream": True, "stream_options": {"include_usage": True}}, False),
        ({"stream": True, "stream_options": {"include_usage": None}}, True),
        # not a boolean: the client's mistake, for the upstream to answer
        ({"stream": True, "stream_options": {"include_usage": "yes"}}, False),
        ({"stream": True, "stream_options": {"include_usage": 1}}, False),
        ({"stream": True, "stream_options": {"include_usage": 0}}, False),
        ({"stream": False}, False),
        ({}, False),
    ],
)
def test_needs_include_usage(body: dict[str, Any], needed: bool) -> None:
    assert needs_include_usage(body) is needed


def test_usage_chunk_detection() -> None:
    assert is_injected_usage_chunk({"choices": [], "usage": {"prompt_tokens": 3}})
    assert not is_injected_usage_chunk({"choices": [], "usage": None})  # Azure filter chunk
    assert not is_injected_usage_chunk({"choices": [{"delta": {}}], "usage": None})


def test_only_the_usage_chunk_is_dropped_and_only_empty_choices_are_parsed_early() -> None:
    content = b'data: {"choices":[{"delta":{"content":"say \\"choices\\": []"}}],"usage":null}\n\n'
    azure_filter = b'data: {"choices": [], "usage": null, "prompt_filter_results": []}\n\n'
    usage = b'data: {"id":"c1","choices" : [ ],"usage":{"prompt_tokens":3}}\n\n'
    done = b"data: [DONE]\n\n"
    events = SSEDecoder().feed(content + azure_filter + usage + done)
    forwarded, parsed = drop_injected_usage_chunk(events)
    assert forwarded == content + azure_filter + done
    # the content chunk (whose text only quotes the key) waits to be parsed after the send
    assert sorted(parsed) == [1, 2]
    assert parsed[2] == {"id": "c1", "choices": [], "usage": {"prompt_tokens": 3}}


text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    extra=st.dictionaries(text, json_values, max_size=4),
    options=st.none()
    | st.fixed_dictionaries(
        {}, optional={"a": json_values, "include_usage": st.none() | st.booleans()}
    ),
    with_options=st.booleans(),
    indent=st.sampled_from([None, 1, 4]),
    ensure_ascii=st.booleans(),
)
def test_result_parses_to_the_body_plus_the_flag(
    extra: dict[str, Any],
    options: dict[str, Any] | None,
    with_options: bool,
    indent: int | None,
    ensure_ascii: bool,
) -> None:
    body = {k: v for k, v in extra.items() if k not in ("stream", "stream_options")}
    body["stream"] = True
    if with_options:
        body["stream_options"] = options
    raw = json.dumps(body, indent=indent, ensure_ascii=ensure_ascii).encode()
    out = inject_include_usage(raw, body)
    assert out is not None
    expected = dict(body)
    expected["stream_options"] = {**((with_options and options) or {}), "include_usage": True}
    assert json.loads(out) == expected
    # everything outside the splice is byte-identical: the output contains the input's bytes
    # in order, with one contiguous insertion or replacement
    prefix = 0
    while prefix < min(len(raw), len(out)) and raw[prefix] == out[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(raw), len(out)) - prefix and raw[-1 - suffix] == out[-1 - suffix]:
        suffix += 1
    assert len(raw) - prefix - suffix <= len("false")  # at most the old include_usage value
