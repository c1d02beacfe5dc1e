"""fingerprint_request / first_divergence / detect_api across every supported API."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache import fingerprint
from promptcache.canonical import canonical_json
from promptcache.errors import CanonicalizationError, RequestShapeError
from promptcache.fingerprint import (
    EMPTY_PREFIX_HASH,
    RequestFingerprint,
    detect_api,
    fingerprint_request,
    first_divergence,
)
from promptcache.tokens import count_tokens

RULES = "Rule 1: never log secrets.\nRule 2: prefer small functions.\n" * 20

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 512,
    "tools": [
        {"name": "run_sql", "description": "Run SQL", "input_schema": {"type": "object"}},
        {
            "name": "read_file",
            "description": "Read a file",
            "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        },
    ],
    "system": [
        {"type": "text", "text": "You are a coding assistant."},
        {"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}},
    ],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Why is my query slow?"}]},
    ],
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_anthropic_segments_hashes_and_chain() -> None:
    fp = fingerprint_request(ANTHROPIC, "anthropic")
    assert [s.path for s in fp.segments] == [
        "tools[0]",
        "tools[1]",
        "system[0]",
        "system[1]",
        "messages[0]",
    ]
    assert [s.kind for s in fp.segments] == ["tools", "tools", "system", "system", "messages"]
    # hashes are over canonical JSON with cache_control removed
    tool1 = dict(ANTHROPIC["tools"][1])
    del tool1["cache_control"]
    assert fp.segments[1].text == canonical_json(tool1)
    assert fp.segments[1].sha256 == _sha(canonical_json(tool1))
    assert fp.segments[1].num_chars == len(canonical_json(tool1))
    prev = EMPTY_PREFIX_HASH
    for seg, chained in zip(fp.segments, fp.chained, strict=False):
        prev = hashlib.sha256(bytes.fromhex(prev) + bytes.fromhex(seg.sha256)).hexdigest()
        assert chained == prev
    assert fp.prefix_hash == fp.chained[-1]
    assert fp.model == "claude-sonnet-4-5" and fp.api == "anthropic"
    assert [(b.path, b.ttl, b.segment_index) for b in fp.breakpoints] == [
        ("tools[1]", "1h", 1),
        ("system[1]", "5m", 3),
    ]
    assert 300 < fp.approx_prefix_tokens < 600


def test_moving_a_breakpoint_changes_no_hash() -> None:
    moved = copy.deepcopy(ANTHROPIC)
    del moved["system"][1]["cache_control"]
    moved["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    a, b = fingerprint_request(ANTHROPIC, "anthropic"), fingerprint_request(moved, "anthropic")
    assert a.chained == b.chained
    assert [bp.path for bp in b.breakpoints] == ["tools[1]", "messages[0].content[0]"]
    assert first_divergence(a, b) is None


def test_anthropic_string_system_and_automatic_caching() -> None:
    body = {
        "model": "m",
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
        "cache_control": {"type": "ephemeral"},
    }
    fp = fingerprint_request(body, "anthropic")
    assert [s.path for s in fp.segments] == ["system", "messages[0]"]
    assert fp.segments[0].text == '"Be brief."'
    assert [(b.path, b.segment_index) for b in fp.breakpoints] == [("cache_control", 1)]


def test_divergence_names_path_offset_and_excerpts() -> None:
    changed = copy.deepcopy(ANTHROPIC)
    changed["system"][1]["text"] = RULES.replace("Rule 2: prefer", "Rule 2: avoid", 1)
    d = first_divergence(
        fingerprint_request(ANTHROPIC, "anthropic"), fingerprint_request(changed, "anthropic")
    )
    assert d is not None
    assert (d.index, d.change, d.segment_path, d.path) == (
        3,
        "changed",
        "system[1]",
        "system[1].text",
    )
    assert d.field_offset == RULES.index("prefer")
    text = fingerprint_request(ANTHROPIC, "anthropic").segments[3].text
    assert d.offset == text.index("prefer")
    assert "prefer" in d.before and "avoid" in d.after
    assert "system[1].text changed at char" in d.describe()


def test_divergence_added_removed_and_equal() -> None:
    short = fingerprint_request(ANTHROPIC, "anthropic")
    longer_body = copy.deepcopy(ANTHROPIC)
    longer_body["messages"].append({"role": "assistant", "content": "Missing index."})
    longer = fingerprint_request(longer_body, "anthropic")
    added = first_divergence(short, longer)
    assert added is not None and (added.change, added.index, added.path) == (
        "added",
        5,
        "messages[1]",
    )
    removed = first_divergence(longer, short)
    assert removed is not None and removed.change == "removed" and removed.before
    assert first_divergence(short, fingerprint_request(copy.deepcopy(ANTHROPIC))) is None


def test_divergence_inside_nested_lists_and_missing_keys() -> None:
    a = {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}], "system": "s"}
    b = copy.deepcopy(a)
    b["messages"][0]["content"].append({"type": "text", "text": "y"})
    d = first_divergence(fingerprint_request(a, "anthropic"), fingerprint_request(b, "anthropic"))
    assert d is not None and d.path == "messages[0].content[1]" and d.field_offset is None
    c = copy.deepcopy(a)
    c["messages"][0]["name"] = "bob"
    d = first_divergence(fingerprint_request(a, "anthropic"), fingerprint_request(c, "anthropic"))
    assert d is not None and d.path == "messages[0].name"


def test_openai_chat() -> None:
    body = {
        "model": "gpt-5",
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        "messages": [
            {"role": "developer", "content": "rules"},
            {"role": "user", "content": "q"},
        ],
    }
    fp = fingerprint_request(body, "openai_chat")
    assert [(s.path, s.kind) for s in fp.segments] == [
        ("tools[0]", "tools"),
        ("response_format", "tools"),
        ("messages[0]", "system"),
        ("messages[1]", "messages"),
    ]
    assert detect_api(body) == "openai_chat"


def test_openai_responses_and_completions() -> None:
    body = {
        "model": "gpt-5",
        "instructions": "rules",
        "input": [{"role": "user", "content": "q"}],
        "tools": [{"type": "function", "name": "f", "parameters": {}}],
        "text": {"format": {"type": "json_schema", "name": "x", "schema": {}}},
        "previous_response_id": "resp_1",
    }
    fp = fingerprint_request(body)
    assert fp.api == "openai_responses"
    assert [s.path for s in fp.segments] == [
        "tools[0]",
        "text.format",
        "instructions",
        "previous_response_id",
        "input[0]",
    ]
    assert [s.path for s in fingerprint_request({"input": "hello"}).segments] == ["input"]
    comp = fingerprint_request({"model": "gpt-3.5-turbo-instruct", "prompt": "Say hi"})
    assert comp.api == "openai_completions" and [s.path for s in comp.segments] == ["prompt"]


def test_gemini() -> None:
    body = {
        "systemInstruction": {"parts": [{"text": "rules"}]},
        "tools": [{"functionDeclarations": [{"name": "f"}]}],
        "contents": [{"role": "user", "parts": [{"text": "q"}]}],
    }
    fp = fingerprint_request(body)
    assert fp.api == "gemini" and fp.model is None
    assert [s.path for s in fp.segments] == ["tools[0]", "systemInstruction", "contents[0]"]
    assert fp.breakpoints == []


def test_bedrock_cache_points_are_breakpoints_not_segments() -> None:
    body = {
        "modelId": "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "toolConfig": {
            "tools": [{"toolSpec": {"name": "f"}}, {"cachePoint": {"type": "default", "ttl": "1h"}}]
        },
        "system": [{"text": "rules"}, {"cachePoint": {"type": "default"}}],
        "messages": [
            {"role": "user", "content": [{"text": "q"}, {"cachePoint": {"type": "default"}}]}
        ],
    }
    fp = fingerprint_request(body)
    assert fp.api == "bedrock_converse" and fp.model == body["modelId"]
    assert [s.path for s in fp.segments] == ["toolConfig.tools[0]", "system[0]", "messages[0]"]
    assert json.loads(fp.segments[2].text) == {"content": [{"text": "q"}], "role": "user"}
    assert [(b.path, b.ttl, b.segment_index) for b in fp.breakpoints] == [
        ("toolConfig.tools[1]", "1h", 0),
        ("system[1]", "5m", 1),
        ("messages[0].content[1]", "5m", 2),
    ]


def test_round_trip_through_dict() -> None:
    fp = fingerprint_request(ANTHROPIC, "anthropic")
    assert RequestFingerprint.from_dict(json.loads(json.dumps(fp.to_dict()))) == fp


@pytest.mark.parametrize(
    ("body", "api", "message"),
    [
        ({"messages": "hi"}, "anthropic", r"`messages` must be a list, got str"),
        # a string is also a valid system prompt and Responses input: the message says so
        (
            {"system": 7, "messages": []},
            "anthropic",
            r"`system` must be a string or a list, got int",
        ),
        (
            {"input": {"role": "user"}},
            "openai_responses",
            r"`input` must be a string or a list, got dict",
        ),
        ({"model": "x"}, "anthropic", r"found no prompt content"),
        ({"contents": [{"parts": [{"text": "hi"}]}]}, "anthropic", r"looks like gemini"),
        ({"messages": []}, "cohere", r"unknown api 'cohere'"),
        ({"foo": 1}, "auto", r"cannot tell which API.*keys: foo"),
        ([1, 2], "auto", r"must be a JSON object"),
    ],
)
def test_shape_errors(body: Any, api: str, message: str) -> None:
    with pytest.raises(RequestShapeError, match=message):
        fingerprint_request(body, api)


@pytest.mark.parametrize(
    ("body", "api", "message"),
    [
        ({"model": "x"}, "anthropic", "prompt fields (messages, system, tools), none is present"),
        # present but empty: the fields are there, and no other API would read more from them
        ({"messages": []}, "anthropic", "(messages, system, tools), messages is empty"),
        ({"messages": None, "system": []}, "anthropic", "messages, system are empty"),
        ({"contents": []}, "anthropic", "(messages, system, tools), none is present"),
        ({"model": "m"}, "gemini", "(cachedContent, cached_content, contents, systemInstruction,"),
    ],
)  # fmt: skip
def test_an_empty_body_names_the_api_s_own_fields_and_no_hint_that_leads_nowhere(
    body: Any, api: str, message: str
) -> None:
    with pytest.raises(RequestShapeError) as info:
        fingerprint_request(body, api)
    assert message in str(info.value)
    assert "looks like" not in str(info.value)


def test_nan_in_body_is_a_canonicalization_error() -> None:
    with pytest.raises(CanonicalizationError, match=r"\$\.temperature|is nan"):
        fingerprint_request(
            {"messages": [{"role": "user", "content": float("nan")}]}, "openai_chat"
        )


@pytest.mark.parametrize(
    ("body", "api", "where"),
    [
        (
            {
                "model": "m",
                "system": "s",
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "user", "content": [{"type": "text", "text": "y", "n": float("nan")}]},
                ],
            },
            "anthropic",
            "messages[1].content[0].n is nan",
        ),
        (
            {"tools": [{"name": "t", "input_schema": {"default": float("inf")}}], "messages": []},
            "anthropic",
            "tools[0].input_schema.default is inf",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"text": "x", "n": float("nan")}]}]},
            "gemini",
            "contents[0].parts[0].n is nan",
        ),
        (
            {"system": [{"type": "text", "text": "a"}, {"type": "text", "text": "\ud800"}]},
            "anthropic",
            "system[1].text holds a lone surrogate",
        ),
    ],
)
def test_a_value_without_json_form_is_located_in_the_whole_body(
    body: dict[str, Any], api: str, where: str
) -> None:
    # the error's JSON path starts at the request, not at the segment (`$.content[0].n`), so
    # `promptcache hash` and the SDK point at the field that holds the value
    with pytest.raises(CanonicalizationError) as info:
        fingerprint_request(body, api)
    assert str(info.value).startswith(where)


@pytest.mark.parametrize(
    ("body", "api"),
    [
        ({"system": "s", "messages": []}, "anthropic"),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, "anthropic"),
        ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "bedrock_converse"),
        ({"messages": [{"role": "user", "content": "x"}]}, "openai_chat"),
        ({"prompt": "x"}, "openai_completions"),
    ],
)
def test_detect_api(body: dict[str, Any], api: str) -> None:
    assert detect_api(body) == api


_content = st.text(max_size=8)
_messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": _content}),
    min_size=1,
    max_size=5,
)


@settings(max_examples=120, deadline=None)
@given(a=_messages, b=_messages)
def test_fingerprint_changes_iff_content_does(a: list[Any], b: list[Any]) -> None:
    fa = fingerprint_request({"system": "s", "messages": a}, "anthropic")
    fb = fingerprint_request({"system": "s", "messages": b}, "anthropic")
    assert (fa.prefix_hash == fb.prefix_hash) == (a == b)
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        assert (fa.segments[i + 1].sha256 == fb.segments[i + 1].sha256) == (x == y)
    d = first_divergence(fa, fb)
    assert (d is None) == (a == b)
    if d is not None:
        pairs = enumerate(zip(a, b, strict=False))
        common = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
        assert d.index == common + 1


def test_approx_tokens_count_prompt_text_and_are_memoised() -> None:
    body = {
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi there"}]}],
    }
    fingerprint._TOKENS_BY_SHA.clear()
    first = fingerprint_request(body, "anthropic")
    assert first.approx_prefix_tokens == count_tokens("Be brief.") + count_tokens("hi there")
    assert len(fingerprint._TOKENS_BY_SHA) == 2
    assert fingerprint_request(body, "anthropic").approx_prefix_tokens == first.approx_prefix_tokens


B64 = "iVBORw0KGgo" * 4000  # 44,000 characters of base64, as an image or a PDF is sent


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (  # Responses input_image: image_url is the data URL itself, a string
            "openai_responses",
            {
                "model": "gpt-5",
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": f"data:image/png;base64,{B64}"},
                            {"type": "input_file", "file_data": B64, "filename": "a.pdf"},
                            {"type": "input_text", "text": "hi there"},
                        ],
                    },
                    {"type": "reasoning", "encrypted_content": B64, "summary": []},
                ],
            },
        ),
        (  # Chat file part: file_data is base64
            "openai_chat",
            {
                "model": "gpt-5",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "file", "file": {"file_data": B64, "filename": "a.pdf"}},
                            {"type": "text", "text": "hi there"},
                        ],
                    }
                ],
            },
        ),
        (  # a thinking block's signature in the history
            "anthropic",
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": [{"type": "thinking", "thinking": "hi", "signature": B64}],
                    },
                    {"role": "user", "content": "there"},
                ],
            },
        ),
    ],
)
def test_binary_payloads_and_opaque_tokens_are_not_counted(api: str, body: dict[str, Any]) -> None:
    """approx_prefix_tokens is documented to leave images and other binary payloads out, yet a
    Responses image (its image_url is the data URL string), a file's file_data, a reasoning
    item's encrypted_content or a thinking signature counted as ~11,000 tokens each."""
    fp = fingerprint_request(body, api)
    assert fp.approx_prefix_tokens < 20, fp.approx_prefix_tokens


def test_messages_seen_before_hash_as_they_did_the_first_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Message segments of the plain ``{"role", "content"}`` shape come from the memo on a
    repeat; every segment is the canonical JSON of its value and that text's SHA-256 either
    way, and the memo stays within its character budget (the oldest dropped first)."""
    monkeypatch.setattr(fingerprint, "_SEGMENTS_BY_MESSAGE", fingerprint._Memo())
    monkeypatch.setattr(fingerprint, "_segment_memo_chars", 0)
    monkeypatch.setattr(fingerprint, "_SEGMENT_MEMO_CHARS", 400)
    system = 'You are terse. Ünïcödé, "quotes", \\ and a newline\n.' * 2
    chat = [{"role": "system", "content": system}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "name": "bot"},  # three keys: not kept
            {"role": "user", "content": [{"type": "text", "text": "a list"}]}]  # fmt: skip
    anthropic = {"system": system, "messages": [
        {"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}}]}  # fmt: skip
    bodies = [({"model": "m", "messages": chat}, "openai_chat"), (anthropic, "anthropic"),
              ({"model": "m", "messages": chat[:2]}, "openai_chat")]  # fmt: skip
    first = [fingerprint_request(body, api) for body, api in bodies]
    assert ("user", "hi") in fingerprint._SEGMENTS_BY_MESSAGE
    assert ("assistant", "hello") not in fingerprint._SEGMENTS_BY_MESSAGE
    again = [fingerprint_request(copy.deepcopy(body), api) for body, api in bodies]
    assert again == first
    for fp, (body, api) in zip(again, bodies, strict=True):
        values = [raw.value for raw in fingerprint.split_request(body, api)[0]]
        for segment, value in zip(fp.segments, values, strict=True):
            assert segment.text == canonical_json(value)
            assert segment.sha256 == hashlib.sha256(segment.text.encode()).hexdigest()
    assert ("system", system) in fingerprint._SEGMENTS_BY_MESSAGE
    # 60 more characters of content do not fit in 400 with the system message (about 250
    # characters held, content and text): the oldest entry, the system message, goes
    fingerprint_request({"model": "m", "messages": [{"role": "user", "content": "x" * 60}]})
    assert ("system", system) not in fingerprint._SEGMENTS_BY_MESSAGE
    assert ("user", "hi") in fingerprint._SEGMENTS_BY_MESSAGE
    held = sum(len(k[1]) + len(v[0]) for k, v in fingerprint._SEGMENTS_BY_MESSAGE.items())
    assert held == fingerprint._segment_memo_chars <= 400


_SCALARS = st.one_of(
    st.text(max_size=20), st.integers(), st.booleans(), st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)  # fmt: skip
_MESSAGE_KEYS = st.sampled_from(
    ["role", "content", "name", "cache_control", "prompt_cache_breakpoint", "cachePoint"]
)
_MESSAGES = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["system", "developer", "user", "assistant"]),
             "content": st.text(max_size=30)}
        ),
        st.dictionaries(_MESSAGE_KEYS, st.one_of(_SCALARS, st.dictionaries(
            st.sampled_from(["type", "ttl", "text"]), _SCALARS, max_size=2)), max_size=3),
        st.lists(_SCALARS, max_size=2),
    ),
    min_size=1,
    max_size=6,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(messages=_MESSAGES)
def test_plain_chat_messages_split_as_the_general_path_splits_them(
    messages: list[Any],
) -> None:
    # A body with "tools": null takes the general path (and adds no tool segment); one without
    # it takes the plain-message shortcut whenever every message is a plain dict of scalars.
    body = {"model": "m", "messages": messages}
    general = {**body, "tools": None}
    try:
        expected = fingerprint.split_request(general, "openai_chat")
    except Exception as exc:  # the same error either way (a dict as a role is unhashable)
        with pytest.raises(type(exc)):
            fingerprint.split_request(body, "openai_chat")
        return
    assert fingerprint.split_request(body, "openai_chat") == expected


def test_ttl_out_of_order_names_the_1h_marker_and_every_5m_one_before_it() -> None:
    """One rule for ``promptcache hash`` and check's PC014: markers in prefix order (by segment,
    whatever order they are listed in), a vendor-fixed TTL (None) taking no part."""
    bp = fingerprint.Breakpoint
    tools, system, late = bp("tools[0]", "5m", 0), bp("system[0]", "5m", 1), bp("m[0]", "1h", 2)
    assert fingerprint.ttl_out_of_order([late, system, tools]) == (late, (tools, system))
    assert fingerprint.ttl_out_of_order([bp("system[0]", "1h", 1), bp("m[0]", "5m", 2)]) is None
    assert fingerprint.ttl_out_of_order([bp("a", None, 0), bp("b", "1h", 1)]) is None
    assert fingerprint.ttl_out_of_order([late, bp("cache_control", "5m", 3)]) is None


def test_divergence_where_a_segment_was_removed_or_added_before_names_both_places() -> None:
    # A tool removed from the list (or added to it): at the first differing index the two
    # requests hold segments of different places, tools[1] in one and system[0] in the other. The
    # path is the tool removed or added, never a key of one segment under the other's path
    # ("tools[1].description"), and describe() says both places.
    def tool(name: str) -> dict[str, Any]:
        return {"name": name, "description": "d", "input_schema": {"type": "object"}}

    two = {"model": "m", "tools": [tool("a"), tool("b")],
           "system": [{"type": "text", "text": "S " * 50}],
           "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    one = {**two, "tools": [tool("a")]}
    removed = first_divergence(
        fingerprint_request(two, "anthropic"), fingerprint_request(one, "anthropic")
    )
    assert removed is not None
    assert (removed.index, removed.change, removed.segment_path, removed.path) == (
        1,
        "changed",
        "system[0]",
        "tools[1]",
    )
    assert removed.old_segment_path == "tools[1]" and removed.field_offset is None
    assert removed.describe() == (
        "segment 1 was tools[1], now system[0] (segments added or removed at or before it): "
        f"{removed.before!r} -> {removed.after!r}"
    )
    added = first_divergence(
        fingerprint_request(one, "anthropic"), fingerprint_request(two, "anthropic")
    )
    # the tool added is named: the old request's system block comes later in the new one
    assert added is not None and (added.segment_path, added.path) == ("tools[1]", "tools[1]")
    assert added.old_segment_path == "system[0]"
    assert added.describe().startswith("segment 1 was system[0], now tools[1] (")
    # a whole list gone: an OpenAI Chat request that drops its tools starts with its messages
    chat = {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are helpful."}]}
    with_tools = {**chat, "tools": [{"type": "function", "function": {"name": "f"}}]}
    gone = first_divergence(
        fingerprint_request(with_tools, "openai_chat"), fingerprint_request(chat, "openai_chat")
    )
    assert gone is not None and (gone.index, gone.segment_path, gone.path) == (
        0,
        "messages[0]",
        "tools[0]",
    )
    assert gone.describe().startswith("segment 0 was tools[0], now messages[0] (")
    added_list = first_divergence(
        fingerprint_request(chat, "openai_chat"), fingerprint_request(with_tools, "openai_chat")
    )
    assert added_list is not None and added_list.path == "tools[0]"
    # segments at the same place still name the differing value inside them
    same = first_divergence(
        fingerprint_request(two, "anthropic"),
        fingerprint_request({**two, "tools": [tool("a"), tool("c")]}, "anthropic"),
    )
    assert same is not None and same.path == "tools[1].name" and same.old_segment_path is None
