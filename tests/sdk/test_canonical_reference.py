"""canonical_json and fingerprint_request give exactly the text, bytes, hashes and errors of a
straightforward reference implementation kept here: build a key-sorted plain copy, then one
``json.dumps``; strip markers node by node; chain hashes through hex strings.

The library takes shortcuts (one pre-built encoder sorting keys itself when the value holds only
the exact types ``json.loads`` gives, leaves kept without descending, digests chained as bytes);
these tests hold them to the reference over arbitrary JSON values and over the values where the
shortcut must step aside (subclasses, tuples, non-string keys, NaN, lone surrogates, nesting at
the depth limit).
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.canonical import (
    MAX_DEPTH,
    canonical_json,
    canonical_json_and_bytes,
    canonical_json_bytes,
)
from promptcache.errors import CanonicalizationError
from promptcache.fingerprint import EMPTY_PREFIX_HASH, fingerprint_request

# -- the reference encoder ------------------------------------------------------------------


def _ref_path(path: tuple[str | int, ...]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _ref_plain(obj: object, path: tuple[str | int, ...]) -> Any:
    if obj is None or obj is True or obj is False:
        return obj
    if isinstance(obj, str):
        return str.__str__(obj)
    if isinstance(obj, int):
        return int.__int__(obj)
    if isinstance(obj, float):
        value = float.__float__(obj)
        if not math.isfinite(value):
            raise CanonicalizationError(
                f"{_ref_path(path)} is {value!r}, which JSON cannot represent; "
                "replace it with a finite number, null or a string"
            )
        return value
    if isinstance(obj, (Mapping, list, tuple)) and len(path) >= MAX_DEPTH:
        raise CanonicalizationError(
            f"{_ref_path(path[:6])}... is nested more than {MAX_DEPTH} levels deep (or contains "
            "a cycle); flatten it: no vendor accepts such a request"
        )
    if isinstance(obj, Mapping):
        for key in obj:
            if not isinstance(key, str):
                raise CanonicalizationError(
                    f"{_ref_path(path)} has a key of type {type(key).__name__} ({key!r}); "
                    "JSON object keys must be strings: convert the key with str() yourself so "
                    "the conversion is explicit"
                )
        return {str.__str__(key): _ref_plain(obj[key], (*path, key)) for key in sorted(obj)}
    if isinstance(obj, (list, tuple)):
        return [_ref_plain(item, (*path, i)) for i, item in enumerate(obj)]
    kind = type(obj).__name__
    hint = (
        "sets have no order: pass sorted(...) as a list"
        if isinstance(obj, (set, frozenset))
        else "bytes have no JSON form: decode or base64-encode them first"
        if isinstance(obj, (bytes, bytearray))
        else "convert it to a dict, list, str, int, float, bool or None first"
    )
    raise CanonicalizationError(f"{_ref_path(path)} has type {kind}, which is not JSON; {hint}")


def reference_canonical_json(obj: object) -> str:
    text = json.dumps(
        _ref_plain(obj, ()), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalizationError(
            _ref_first_surrogate(_ref_plain(obj, ()), ())
            + " that UTF-8 cannot encode; fix the text's decoding"
        ) from None
    return text


def _ref_lone(text: str) -> int | None:
    return next((i for i, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF), None)


def _ref_first_surrogate(plain: Any, path: tuple[str | int, ...]) -> str:
    """Where the first lone surrogate of the canonical text is, by the JSON path ('' if none)."""
    if isinstance(plain, str):
        at = _ref_lone(plain)
        if at is None:
            return ""
        return f"{_ref_path(path)} holds a lone surrogate ({plain[at]!r} at character {at})"
    children: list[tuple[str | None, tuple[str | int, ...], Any]] = []
    if isinstance(plain, dict):
        children = [(key, (*path, key), value) for key, value in sorted(plain.items())]
    elif isinstance(plain, list):
        children = [(None, (*path, i), item) for i, item in enumerate(plain)]
    for key, child_path, child in children:
        at = None if key is None else _ref_lone(key)
        if key is not None and at is not None:
            return (
                f"{_ref_path(path)} has a key holding a lone surrogate ({key[at]!r} at "
                f"character {at} of {key!r})"
            )
        found = _ref_first_surrogate(child, child_path)
        if found:
            return found
    return ""


def _outcome(fn: Any, value: object) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except CanonicalizationError as exc:
        return "error", str(exc)


def assert_same_as_reference(value: object) -> None:
    expected = _outcome(reference_canonical_json, value)
    assert _outcome(canonical_json, value) == expected
    if expected[0] == "ok":
        assert canonical_json_bytes(value) == expected[1].encode("utf-8")
        assert canonical_json_and_bytes(value) == (expected[1], expected[1].encode("utf-8"))


# -- values ---------------------------------------------------------------------------------

# Any code point, lone surrogates included (both sides must then raise the same error).
_any_text = st.text(max_size=10)
_keys = _any_text | st.sampled_from(["é", "ключ", "键", "a", "A", "_", "\u0000", "\U0001f600"])
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats()  # NaN and +/-Infinity included
    | st.sampled_from([0.0, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 0.1, 1.0])
    | _any_text
)
json_like = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_keys, children, max_size=5),
    max_leaves=40,
)


class Color(enum.IntEnum):
    RED = 1


class Name(str, enum.Enum):
    A = "a"


class Ratio(float):
    def __repr__(self) -> str:
        return "RATIO"


class Key(str):
    pass


_odd_scalars = st.sampled_from(
    [Color.RED, Name.A, Ratio(0.5), Key("k"), (1, "t"), {1: "int key"}, {"s"}, b"x", object()]
)
odd_values = st.recursive(
    _scalars | _odd_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(_keys | st.sampled_from([Key("sub"), Key("é")]), children, max_size=4)
        | st.dictionaries(_keys, children, max_size=3).map(MappingProxyType)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=json_like)
def test_json_values_match_the_reference(value: object) -> None:
    assert_same_as_reference(value)


@settings(max_examples=300, deadline=None)
@given(value=odd_values)
def test_non_json_types_match_the_reference(value: object) -> None:
    assert_same_as_reference(value)


@settings(max_examples=200, deadline=None)
@given(value=json_like)
def test_values_read_back_from_json_match_the_reference(value: object) -> None:
    try:
        text = json.dumps(value)  # \\u escapes, so lone surrogates survive the round trip
    except ValueError:  # pragma: no cover - json.dumps allows NaN by default
        return
    assert_same_as_reference(json.loads(text))


def _nested(depth: int, container: str) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value} if container == "dict" else [value]
    return value


@pytest.mark.parametrize("container", ["dict", "list"])
@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 5])
def test_nesting_at_the_depth_limit_matches_the_reference(depth: int, container: str) -> None:
    assert_same_as_reference(_nested(depth, container))
    assert_same_as_reference({"outer": [_nested(depth - 1, container)]})


def test_a_cycle_raises_as_the_reference() -> None:
    value: dict[str, Any] = {"a": [1]}
    value["a"].append(value)
    assert_same_as_reference(value)
    assert _outcome(canonical_json, value)[0] == "error"


# -- the reference fingerprint ----------------------------------------------------------------


def _ref_strip(value: Any, path: str, markers: list[tuple[str, str | None]]) -> Any:
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if key == "cache_control":
                ttl = item.get("ttl", "5m") if isinstance(item, Mapping) else "5m"
                markers.append((path, str(ttl)))
            elif key == "prompt_cache_breakpoint":
                markers.append((path, None))
            else:
                out[key] = _ref_strip(item, f"{path}.{key}", markers)
        return out
    if isinstance(value, (list, tuple)):
        kept = []
        for i, item in enumerate(value):
            if isinstance(item, Mapping) and "cachePoint" in item and len(item) == 1:
                spec = item["cachePoint"]
                ttl = spec.get("ttl", "5m") if isinstance(spec, Mapping) else "5m"
                markers.append((f"{path}[{i}]", str(ttl)))
            else:
                kept.append(_ref_strip(item, f"{path}[{i}]", markers))
        return kept
    return value


_marker = st.sampled_from(
    [
        {"type": "ephemeral"},
        {"type": "ephemeral", "ttl": "1h"},
        "odd",
    ]
)
_block = st.recursive(
    st.text(max_size=8)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.none(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["text", "type", "é", "input", "n"]), children, max_size=3
        )
        | st.fixed_dictionaries({"type": st.just("text"), "cache_control": _marker})
        | st.fixed_dictionaries({"cachePoint": _marker})
    ),
    max_leaves=12,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": st.lists(_block, max_size=3)},
    optional={"cache_control": _marker},
)


@settings(max_examples=200, deadline=None)
@given(messages=st.lists(_message, min_size=1, max_size=4), system=st.text(max_size=20))
def test_fingerprint_matches_the_reference(messages: list[Any], system: str) -> None:
    body = {"model": "m", "system": system, "messages": messages}
    fp = fingerprint_request(body, "anthropic")
    values = [("system", system)] + [(f"messages[{i}]", m) for i, m in enumerate(messages)]
    prev = EMPTY_PREFIX_HASH
    markers: list[tuple[str, str | None]] = []
    assert len(fp.segments) == len(values)
    for segment, chained, (path, value) in zip(fp.segments, fp.chained, values, strict=True):
        text = reference_canonical_json(_ref_strip(value, path, markers))
        sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
        prev = hashlib.sha256(bytes.fromhex(prev) + bytes.fromhex(sha)).hexdigest()
        assert (segment.path, segment.text, segment.num_chars, segment.sha256) == (
            path,
            text,
            len(text),
            sha,
        )
        assert chained == prev
    assert fp.prefix_hash == prev
    assert [(b.path, b.ttl) for b in fp.breakpoints] == markers
