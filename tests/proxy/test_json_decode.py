"""``proxy.json_decode.loads`` gives what ``json.loads`` gives, value and error alike."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptcache.proxy.json_decode import loads


def _typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type (1 and 1.0 and True differ; NaN equals
    itself through its repr), and each object's keys in their order."""
    if isinstance(value, dict):
        return ("object", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("array", [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def _same(document: bytes | str) -> None:
    try:
        expected: Any = _typed(json.loads(document))
    except (ValueError, RecursionError) as exc:
        expected = (type(exc), str(exc))
    try:
        got: Any = _typed(loads(document))
    except (ValueError, RecursionError) as exc:
        got = (type(exc), str(exc))
    assert got == expected


EDGE_CASES = [
    b'{"a": 1, "a": 2}',  # the last duplicate wins
    b'{"b": 1, "a": 2}',  # document order
    b'{"n": 123456789012345678901234567890, "m": -18446744073709551616}',
    b'{"f": 1e400}',  # overflows to inf: msgspec refuses, json gives inf
    b'{"f": -1e400}',
    b'{"f": NaN, "g": Infinity, "h": -Infinity}',
    b'{"s": "\\ud800"}',  # a lone surrogate
    b'{"s": "\\ud83d\\ude00 \\u00e9 \\u0000"}',
    b'{"f": 1.0, "g": -0.0, "h": 0.1e1, "i": 1E2, "j": 1.5e-320, "k": 0.30000000000000004}',
    b'\xef\xbb\xbf{"a": 1}',  # a UTF-8 BOM
    '{"a": "é"}'.encode("utf-16"),
    '{"a": "é"}'.encode("utf-32"),
    b'{"a": "\xff"}',  # not UTF-8
    b'{"a": 1}  \n',
    b'{"a": 1} x',
    b'{"a": 1,}',
    b'{"a": tru}',
    b"",
    b"[]",
    b'"text"',
    b"null",
    b"12",
    b"[" * 600 + b"]" * 600,
    b"[" * 5000 + b"]" * 5000,  # deeper than either parser follows
    '{"a": "é ✓ 𝄞"}',
    bytearray(b'{"usage": {"prompt_tokens": 3}}'),
]


@pytest.mark.parametrize("document", EDGE_CASES)
def test_edge_cases_decode_as_json_loads(document: bytes | str) -> None:
    _same(document)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_json_values, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_generated_documents_decode_as_json_loads(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    _same(text.encode("utf-8", "surrogatepass"))
    _same(text)
