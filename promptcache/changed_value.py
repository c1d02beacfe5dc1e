"""What changed where two prompts first differ: the value around the first differing character,
its kind when recognisable (a time, a date, a UUID, an id, a number), and excerpts of the user's
text that show it.

A cache break is usually one per-request value written into a prompt: the current time, a
request id, a counter. :func:`changed_value` takes the two texts (or two excerpts of them that
agree up to the change) and the offset of the first differing character, widens it to the
*value* that holds it (a run of letters, digits and ``:-_.,+/``), and names the value's kind from
its shape on both sides, so a report can say "a time changed at character 14" instead of
pointing into the middle of ``10:16:21``.

:func:`text_excerpt` cuts the user's text around a position for display on one line: newlines
and tabs are shown as ``⏎`` and ``⇥`` (one character each, so positions inside the excerpt stay
those of the text), and nothing is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["EXCERPT_CHARS", "ChangedValue", "changed_value", "text_excerpt"]

#: Characters shown on each side of the first difference.
EXCERPT_CHARS: Final = 30
#: Characters that continue a value (besides letters and digits): times, dates, ids, numbers.
_VALUE_PUNCTUATION: Final = frozenset(":-_.,+/")
#: (kind, full-match pattern), first match wins.
_KINDS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "a UUID",
        re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I),
    ),
    (
        "a timestamp",
        re.compile(r"\d{4}-\d{2}-\d{2}T\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", re.I),
    ),
    ("a date", re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}\.\d{1,2}\.\d{4}")),
    ("a time", re.compile(r"\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?")),
    ("a Unix timestamp", re.compile(r"1[5-9]\d{8}(\.\d+)?|1[5-9]\d{11}")),
    ("a number", re.compile(r"[+-]?\d+([.,]\d+)*")),
    ("an id", re.compile(r"(?=[0-9a-z_-]*\d)(?=[0-9a-z_-]*[a-z])[0-9a-z_-]{6,}", re.I)),
)
_SHOWN: Final = {"\n": "\u23ce", "\t": "\u21e5", "\r": "\u23ce"}


@dataclass(frozen=True)
class ChangedValue:
    """The value around a first difference.

    Attributes:
        start: offset (in the texts given) where the value starts: at or before the first
            differing character.
        before, after: the value on each side (``""`` when a side has none there).
        kind: ``"a time"``, ``"a date"``, ``"a timestamp"``, ``"a Unix timestamp"``,
            ``"a UUID"``, ``"an id"`` or ``"a number"``; None when the value has no recognisable
            shape (a word of prose, a reordered key).
    """

    start: int
    before: str
    after: str
    kind: str | None


def _is_value_char(ch: str) -> bool:
    return ch.isalnum() or ch in _VALUE_PUNCTUATION


def _value_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and _is_value_char(text[end]):
        end += 1
    while end > start and text[end - 1] in ".,:-/+":  # sentence punctuation after a value
        end -= 1
    return end


def _kind(value: str) -> str | None:
    return next((kind for kind, pattern in _KINDS if pattern.fullmatch(value)), None)


def changed_value(before: str, after: str, offset: int | None = None) -> ChangedValue:
    """The value holding the first difference between ``before`` and ``after``.

    Args:
        before, after: the two texts, or excerpts of them that agree up to the change.
        offset: where they first differ; default: the length of their common prefix.

    Returns:
        The value's start, its text on each side, and its kind when both sides that have a
        value agree on a recognisable one (else the kind of the side that has one).
    """
    if offset is None:
        offset = 0
        while offset < min(len(before), len(after)) and before[offset] == after[offset]:
            offset += 1
    start = offset
    inside = any(offset < len(t) and _is_value_char(t[offset]) for t in (before, after))
    while inside and start > 0 and _is_value_char(before[start - 1]):
        start -= 1
    old = before[start : _value_end(before, start)] if start < len(before) else ""
    new = after[start : _value_end(after, start)] if start < len(after) else ""
    kinds = {_kind(v) for v in (old, new) if v}
    kind = kinds.pop() if len(kinds) == 1 else _kind(new) or _kind(old)
    return ChangedValue(start, old, new, kind)


def text_excerpt(text: str, offset: int, chars: int = EXCERPT_CHARS) -> str:
    """``text[offset - chars : offset + chars]`` on one line: newlines and tabs shown as ``⏎`` and
    ``⇥`` (one character each), nothing escaped."""
    piece = text[max(0, offset - chars) : offset + chars]
    return "".join(_SHOWN.get(ch, ch) for ch in piece)
