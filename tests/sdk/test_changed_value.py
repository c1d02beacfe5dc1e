"""Where two prompts differ, said in the user's own text: positions, the changed value's kind,
excerpts that never end inside an escape (promptcache.changed_value, Divergence.describe)."""

from __future__ import annotations

import pytest

from promptcache import fingerprint_request, first_divergence
from promptcache.changed_value import changed_value, text_excerpt
from promptcache.fingerprint import Divergence


def _divergence(old_text: str, new_text: str) -> Divergence:
    def body(text: str) -> dict[str, object]:
        return {
            "model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": text}],
            "messages": [{"role": "user", "content": "hi"}],
        }

    d = first_divergence(
        fingerprint_request(body(old_text), "anthropic"),
        fingerprint_request(body(new_text), "anthropic"),
    )
    assert d is not None
    return d


@pytest.mark.parametrize(
    ("before", "after", "start", "kind"),
    [
        ("Current time: 10:16:21. Id: x", "Current time: 10:17:01. Id: x", 14, "a time"),
        ("Request id: 3fa9c2d4e5f6.", "Request id: 9ab9c2d4e5f6.", 12, "an id"),
        ("at 2026-11-30T09:00Z now", "at 2026-11-30T09:05Z now", 3, "a timestamp"),
        ("Today is 2026-11-30.", "Today is 2026-12-01.", 9, "a date"),
        ("n=1764493200 x", "n=1764493260 x", 2, "a Unix timestamp"),
        (
            "id 550e8400-e29b-41d4-a716-446655440000",
            "id 650e8400-e29b-41d4-a716-446655440000",
            3,
            "a UUID",
        ),
        ("count 1,234 done", "count 1,299 done", 6, "a number"),
        ("Dear Alice, hello", "Dear Bob, hello", 5, None),
    ],
)
def test_the_changed_value_starts_where_it_starts_and_is_named(
    before: str, after: str, start: int, kind: str | None
) -> None:
    value = changed_value(before, after)
    assert (value.start, value.kind) == (start, kind)
    assert before[value.start :].startswith(value.before)
    assert after[value.start :].startswith(value.after)


def test_describe_counts_characters_of_the_users_text_and_names_a_time() -> None:
    text = "Current time: {}. You review code for the Acme billing service."
    old, new = text.format("10:16:21"), text.format("10:17:01")
    d = _divergence(old, new)
    assert d.field_offset == len("Current time: 10:1")  # the first differing character
    assert d.offset > d.field_offset  # the canonical JSON's offset counts `{"text":"` too
    assert d.describe() == (
        "system[0].text changed at char 14 of the text (a time: '10:16:21' -> '10:17:01'): "
        f"{old[:48]!r} -> {new[:48]!r}"
    )


def test_excerpts_of_the_users_text_show_newlines_and_never_escapes() -> None:
    old = 'Line one\nCurrent time: 09:00 "quoted" \\ path'
    d = _divergence(old, old.replace("09:00", "09:05"))
    assert d.text_before == text_excerpt(old, d.field_offset or 0)
    assert d.text_before is not None and "\u23ce" in d.text_before and "\\n" not in d.text_before
    assert d.value is not None and d.value.kind == "a time"


def _escaped_at(text: str, position: int) -> bool:
    """Whether ``position`` of JSON text falls inside an escape (after its backslash)."""
    for start in range(position - 1, max(-1, position - 6), -1):
        if text[start] != "\\":
            continue
        run = len(text[:start]) - len(text[:start].rstrip("\\"))
        if run % 2:
            continue
        return position < start + (6 if text[start + 1] == "u" else 2)
    return False


@pytest.mark.parametrize("cut", range(0, 40))
def test_json_excerpts_never_start_or_end_inside_an_escape(cut: int) -> None:
    # the first difference lands at every position around newlines, quotes, backslashes and a
    # control character (written as \u0001)
    base = 'a\nb"c\\d\te\u0001f' * 6
    old_text, new_text = base[:cut] + "X" + base[cut:], base[:cut] + "Y" + base[cut:]
    old = fingerprint_request({"model": "m", "messages": [{"role": "user", "content": old_text},
                                                          {"role": "user", "content": "q"}]},
                              "openai_chat")  # fmt: skip
    new = fingerprint_request({"model": "m", "messages": [{"role": "user", "content": new_text},
                                                          {"role": "user", "content": "q"}]},
                              "openai_chat")  # fmt: skip
    d = first_divergence(old, new)
    assert d is not None
    for excerpt, segment in ((d.before, old.segments[0].text), (d.after, new.segments[0].text)):
        start = segment.index(excerpt, max(0, d.offset - 36))
        assert not _escaped_at(segment, start), (cut, excerpt)
        assert not _escaped_at(segment, start + len(excerpt)), (cut, excerpt)
