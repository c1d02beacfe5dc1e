"""canonical_json / canonical_tool_schema / normalize_text: exact outputs, errors and properties."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.canonical import (
    canonical_json,
    canonical_json_bytes,
    canonical_tool_schema,
    normalize_text,
    sort_keys_deep,
)
from promptcache.errors import CanonicalizationError, ConfigError
from promptcache.prompt import PromptBuilder

# JSON values without NaN/Infinity; text excludes lone surrogates (no UTF-8 form).
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)


def _shuffled(value: Any, data: st.DataObject) -> Any:
    """The same JSON value with every mapping's insertion order permuted."""
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {k: _shuffled(value[k], data) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, data) for v in value]
    return value


def test_exact_output() -> None:
    value = {"b": [1, 2.5, (3, True, None)], "a": {"z": "é✓", "y": -0.0, "x": 1e100}}
    assert canonical_json(value) == '{"a":{"x":1e+100,"y":-0.0,"z":"é✓"},"b":[1,2.5,[3,true,null]]}'
    assert canonical_json_bytes({"k": "é"}) == '{"k":"é"}'.encode()


def test_float_repr_is_shortest_round_trip() -> None:
    assert canonical_json([0.1, 1.0, 1 / 3, 123456789.0]) == (
        "[0.1,1.0,0.3333333333333333,123456789.0]"
    )


def test_subclasses_lose_their_repr() -> None:
    class Color(enum.IntEnum):
        RED = 1

    class Name(str, enum.Enum):
        A = "a"

    assert canonical_json({"c": Color.RED, "n": Name.A}) == '{"c":1,"n":"a"}'


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": float("nan")}, r"\$\.a is nan"),
        ({"a": [1, float("inf")]}, r"\$\.a\[1\] is inf"),
        ({"a": {1: "x"}}, r"\$\.a has a key of type int"),
        ({"a": {"b", "c"}}, r"type set.*sorted"),
        ({"a": b"raw"}, r"type bytes.*base64"),
        ({"a": object()}, r"\$\.a has type object"),
        ({"a": "\ud800"}, r"lone surrogate"),
    ],
)
def test_rejects_values_without_a_canonical_form(value: object, message: str) -> None:
    with pytest.raises(CanonicalizationError, match=message):
        canonical_json(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"a": {"b": ["fine", "x\ud800y"]}},
            "$.a.b[1] holds a lone surrogate ('\\ud800' at character 1) that UTF-8 cannot "
            "encode; fix the text's decoding",
        ),
        (
            {"z": "ok", "a": {"k\udce9": 1}},
            "$.a has a key holding a lone surrogate ('\\udce9' at character 1 of 'k\\udce9') "
            "that UTF-8 cannot encode; fix the text's decoding",
        ),
        # the first in the canonical text: keys sorted, so $.a before $.b however built
        (
            {"b": "\ud800", "a": ("\udfff",)},
            "$.a[0] holds a lone surrogate ('\\udfff' at character 0) that UTF-8 cannot "
            "encode; fix the text's decoding",
        ),
        ("\ud83d", "$ holds a lone surrogate ('\\ud83d' at character 0)"),
    ],
)
def test_a_lone_surrogate_is_located_by_its_json_path(value: object, message: str) -> None:
    # the error said only 'a string contains a lone surrogate (... at character 53 of the JSON
    # text)', where every other value without a JSON form names its path
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(value)
    assert str(info.value).startswith(message)


def test_a_tool_schema_with_a_lone_surrogate_is_refused_when_the_tool_is_added() -> None:
    # canonical_tool_schema let it through, so PromptBuilder.tool() took it and the renderer
    # failed later without naming the tool or the place
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "caf\udce9"}},
    }
    with pytest.raises(CanonicalizationError, match=r"^\$\.properties\.city\.description holds"):
        canonical_tool_schema(schema)
    builder = PromptBuilder("claude-sonnet-4-5").system("You plan trips.")
    with pytest.raises(CanonicalizationError, match=r"^\$\.properties\.city\.description holds"):
        builder.tool("weather", "Weather of a city.", schema)
    assert builder.tools == ()


def test_canonicalization_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        canonical_json(float("-inf"))


def test_sort_keys_deep_builds_insertion_ordered_dicts() -> None:
    out = sort_keys_deep({"b": {"d": 1, "c": 2}, "a": (1,)})
    assert list(out) == ["a", "b"] and list(out["b"]) == ["c", "d"] and out["a"] == [1]
    assert json.dumps(out, separators=(",", ":")) == canonical_json(out)


def test_tool_schema_sorts_required_and_normalizes_descriptions() -> None:
    tool = {
        "name": "query",
        "input_schema": {
            "type": "object",
            "required": ["sql", "limit"],
            "properties": {
                "sql": {"type": "string", "description": "SQL text  \r\nOne statement."},
                "limit": {"type": "integer", "enum": [100, 10]},
            },
        },
        "description": "Run SQL.\t",
    }
    out = canonical_tool_schema(tool)
    assert list(out) == ["description", "input_schema", "name"]
    assert out["description"] == "Run SQL."
    assert out["input_schema"]["required"] == ["limit", "sql"]
    assert out["input_schema"]["properties"]["sql"]["description"] == "SQL text\nOne statement."
    assert out["input_schema"]["properties"]["limit"]["enum"] == [100, 10]  # order kept
    raw = canonical_tool_schema(tool, normalize=False)
    assert raw["description"] == "Run SQL.\t"


def test_tool_schema_rejects_non_string_required() -> None:
    with pytest.raises(CanonicalizationError, match=r"required must list property names"):
        canonical_tool_schema({"input_schema": {"required": [1]}})


def test_normalize_text() -> None:
    assert normalize_text("a \t\r\n  b  \rc\u00a0\n\n") == "a\n  b\nc\n\n"
    assert normalize_text("") == ""


@settings(max_examples=150, deadline=None)
@given(value=json_values, data=st.data())
def test_invariant_under_key_permutation_and_idempotent(value: Any, data: st.DataObject) -> None:
    text = canonical_json(value)
    assert canonical_json(_shuffled(value, data)) == text
    assert canonical_json(json.loads(text)) == text
    assert json.loads(text) == value


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab \t\r\n\u00a0"), max_size=30))
def test_normalize_text_is_idempotent_and_clean(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert "\r" not in once
    assert all(line == line.rstrip() for line in once.split("\n"))


@pytest.mark.parametrize(
    "build",
    [
        lambda big: {"a": [1, big]},  # exact JSON values: the fast path
        lambda big: {"a": (1, big)},  # a tuple: through sort_keys_deep's conversion
        lambda big: {"a": [1, -big]},
    ],
)
def test_an_int_too_long_for_text_is_located(build: Any) -> None:
    # json's own ValueError ("Exceeds the limit (4300 digits) for integer string conversion")
    # came through without the path or what to do
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(build(10**5000))
    assert str(info.value).startswith("$.a[1] is an integer of more than 4300 digits")
    assert str(info.value).endswith("send it as a string")
    assert canonical_json(build(10**600)) == canonical_json(json.loads(json.dumps(build(10**600))))


def test_normalize_text_needs_text() -> None:
    with pytest.raises(ConfigError, match="normalize_text\\(\\) needs str text, got int"):
        normalize_text(5)  # type: ignore[arg-type]
