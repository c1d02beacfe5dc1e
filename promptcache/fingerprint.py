"""Fingerprints of a request's cacheable prefix: one SHA-256 per segment plus a chained hash.

The scheme is the one prefix-caching engines use for KV blocks (each block's hash is seeded with
its parent's, as in vLLM's automatic prefix caching,
https://docs.vllm.ai/en/latest/design/prefix_caching.html , checked 2026-11-30), applied to
request segments instead of token blocks:

* ``segment.sha256 = SHA-256(canonical_json_bytes(segment value))`` with cache markers removed
  (see ``promptcache.segments``), so moving a breakpoint does not change any hash;
* ``chained[0] = SHA-256(EMPTY || sha[0])`` and ``chained[i] = SHA-256(chained[i-1] || sha[i])``
  over the raw 32-byte digests, where ``EMPTY = SHA-256(b"")``. Two requests share a cacheable
  prefix of ``n`` segments exactly when ``chained[n-1]`` is equal.

``first_divergence`` compares two fingerprints and names the first changed segment, the JSON
path of the first changed field inside it (``system[1].text``), the character offset and a short
before/after excerpt: the answer to "why did my cache hit rate drop?".
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from promptcache.builtin_tools import builtin_tool_tokens
from promptcache.canonical import canonical_json_and_bytes
from promptcache.changed_value import ChangedValue, changed_value, text_excerpt
from promptcache.errors import CanonicalizationError, ConfigError
from promptcache.segments import (
    APIS,
    RawBreakpoint,
    RawSegment,
    SegmentKind,
    detect_api,
    split_request,
)
from promptcache.tokens import count_tokens_reusing

__all__ = [
    "APIS",
    "EMPTY_PREFIX_HASH",
    "Breakpoint",
    "Divergence",
    "PromptTexts",
    "RequestFingerprint",
    "Segment",
    "common_prefix_len",
    "detect_api",
    "fingerprint_request",
    "first_divergence",
    "prompt_texts",
    "ttl_out_of_order",
]

#: The prefix hash of a request with no segments: SHA-256 of the empty byte string.
EMPTY_PREFIX_HASH = hashlib.sha256(b"").hexdigest()
_EMPTY_DIGEST = hashlib.sha256(b"").digest()

#: Keys whose string values are not prompt text (structure, ids, binary payloads and opaque
#: tokens); not counted in ``approx_prefix_tokens``. Besides the generic ones: OpenAI's
#: ``image_url`` (a data URL or link: a string in Responses ``input_image``, an object in Chat),
#: ``file_data`` (Chat ``file``, Responses ``input_file``: base64) and ``file_id``, Gemini's
#: ``fileUri``/``file_uri``, the ``signature`` of Anthropic thinking blocks and Bedrock
#: reasoning, and the ``encrypted_content`` of Responses reasoning items.
_UNCOUNTED_KEYS = frozenset(
    {
        "type",
        "role",
        "data",
        "bytes",
        "url",
        "media_type",
        "mimeType",
        "mime_type",
        "id",
        "image_url",
        "file_data",
        "file_id",
        "fileUri",
        "file_uri",
        "signature",
        "encrypted_content",
    }
)
_EXCERPT_CHARS = 30


@dataclass(frozen=True)
class Segment:
    """One prefix segment (a tool, a system block or a message) and its hash.

    Attributes:
        path: where it sits in the body: ``tools[0]``, ``system[1]``, ``messages[3]``,
            ``instructions``, ``contents[2]``, ``prompt``...
        kind: ``"tools"``, ``"system"`` or ``"messages"``.
        sha256: hex SHA-256 of the UTF-8 bytes of ``text``.
        num_chars: ``len(text)`` in characters (not bytes).
        text: the segment's canonical JSON text, cache markers removed.
        num_tokens: its share of ``approx_prefix_tokens`` (``cl100k_base`` tokens of its
            prompt text, plus, for an Anthropic built-in tool such as ``computer_20250124``,
            the tokens the API adds for its definition, ``promptcache.builtin_tools``; the
            segments' counts sum to it); None when not known (a segment
            rebuilt from a log that kept its size in characters only).
    """

    path: str
    kind: SegmentKind
    sha256: str
    num_chars: int
    text: str
    num_tokens: int | None = None


@dataclass(frozen=True)
class Breakpoint:
    """A cache marker in the request (``cache_control`` or a Bedrock ``cachePoint`` block).

    Attributes:
        path: the marked block (``system[0]``, ``messages[2].content[1]``) or ``cache_control``
            for Anthropic's top-level automatic caching.
        ttl: ``"5m"`` or ``"1h"`` (``"5m"`` when the marker gives none); None when the vendor
            fixes the TTL.
        segment_index: index in ``segments`` of the last segment the cached prefix includes.
    """

    path: str
    ttl: str | None
    segment_index: int


def ttl_out_of_order(
    breakpoints: Sequence[Breakpoint],
) -> tuple[Breakpoint, tuple[Breakpoint, ...]] | None:
    """The first ``"1h"`` marker that follows a ``"5m"`` one in the prefix, with every ``"5m"``
    marker before it (prefix order, the first one first); None when the TTLs fall in order.

    Anthropic answers 400 and Bedrock a ValidationException to a request whose longer TTLs do
    not all come before its shorter ones. Markers are taken in prefix order (by
    ``segment_index``, then as listed); one whose TTL the vendor fixes (None) or that is not
    ``"5m"``/``"1h"`` takes no part.
    """
    ordered = sorted(breakpoints, key=lambda b: b.segment_index)  # stable: block order within
    for i, bp in enumerate(ordered):
        if bp.ttl != "1h":
            continue
        shorter = tuple(b for b in ordered[:i] if b.ttl == "5m")
        if shorter:
            return bp, shorter
    return None


@dataclass(frozen=True)
class RequestFingerprint:
    """Per-segment and chained prefix hashes of one request body.

    Attributes:
        api: the API the body was read as (one of ``APIS``).
        model: the body's ``model`` (``modelId`` for Bedrock), or None.
        segments: in prefix order.
        chained: ``chained[i]`` is the prefix hash after segment ``i`` (hex SHA-256).
        prefix_hash: ``chained[-1]``, or ``EMPTY_PREFIX_HASH`` when there are no segments.
        breakpoints: cache markers found, in body order.
        approx_prefix_tokens: tokens of the prompt text in all segments, counted with
            ``cl100k_base`` (an approximation for non-OpenAI models; see ``promptcache.tokens``).
            Tool definitions count as their canonical JSON, and an Anthropic built-in tool
            (computer use, text editor, bash) also counts the definition the API expands it
            into (``promptcache.builtin_tools``); images and other binary payloads are not
            counted.
    """

    api: str
    model: str | None
    segments: list[Segment]
    chained: list[str]
    prefix_hash: str
    breakpoints: list[Breakpoint]
    approx_prefix_tokens: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``RequestFingerprint.from_dict`` reverses it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestFingerprint:
        """Rebuild a fingerprint stored with ``to_dict``.

        Raises:
            ConfigError: ``data`` lacks a field or has one of the wrong type.
        """
        try:
            return cls(
                api=str(data["api"]),
                model=None if data["model"] is None else str(data["model"]),
                segments=[Segment(**seg) for seg in data["segments"]],
                chained=[str(h) for h in data["chained"]],
                prefix_hash=str(data["prefix_hash"]),
                breakpoints=[Breakpoint(**bp) for bp in data["breakpoints"]],
                approx_prefix_tokens=int(data["approx_prefix_tokens"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"stored fingerprint is not in the expected format ({exc!r}); delete it and "
                "let it be recorded again"
            ) from None


#: APIs whose tool list may name Anthropic's built-in tools (``promptcache.builtin_tools``).
_BUILTIN_TOOL_APIS: Final = frozenset({"anthropic", "bedrock_converse"})


def fingerprint_request(
    body: Mapping[str, Any], api: str = "auto", texts: PromptTexts | None = None
) -> RequestFingerprint:
    """Hash every prefix segment of a vendor request body, and the chained prefix.

    Args:
        body: the JSON body (a mapping) of an ``anthropic`` Messages, ``openai_chat``,
            ``openai_responses``, ``gemini`` generateContent, ``bedrock_converse`` or
            ``openai_completions`` request.
        api: one of ``APIS``, or ``"auto"`` to use ``detect_api(body)``.
        texts: ``prompt_texts(body, api)`` already computed for this body (its segments are
            then not split and serialised again); None to compute them here.

    Returns:
        A ``RequestFingerprint``. Equal segment values give equal hashes whatever their key
        order; cache markers never change a hash.

    Raises:
        RequestShapeError: unknown ``api``, undetectable body or wrong container types.
        CanonicalizationError: a value has no canonical JSON form (NaN, Infinity...).
    """
    if texts is None:
        texts = prompt_texts(body, api)
    api = texts.api
    segments: list[Segment] = []
    chained: list[str] = []
    prev = EMPTY_PREFIX_HASH
    prev_digest = _EMPTY_DIGEST
    num_tokens = 0
    for raw, text, known in zip(texts.segments, texts.texts, texts._known, strict=True):
        value = raw.value
        if isinstance(known, bytes):  # serialised here: hash it (and remember a plain message)
            seg_hash = hashlib.sha256(known)
            digest, sha = seg_hash.digest(), seg_hash.hexdigest()
            key = _message_key(value)
            if key is not None:
                _remember_message(key, (text, digest, sha))
        else:
            _, digest, sha = known
        tokens = _segment_tokens(sha, raw.kind, value, text)
        if raw.kind == "tools" and api in _BUILTIN_TOOL_APIS and isinstance(value, Mapping):
            tokens += builtin_tool_tokens(value)  # the definition the API expands it into
        # The segment and its link of the chain, by what fixes them (the text by its digest):
        # a conversation's repeated turns take them from the memo instead of being hashed again.
        step_key = (prev_digest, raw.path, raw.kind, digest, tokens)
        step = _STEPS.get(step_key)
        if step is None:
            link = hashlib.sha256(prev_digest + digest)  # chained[i]: over raw digests
            segment = Segment(raw.path, raw.kind, sha, len(text), text, tokens)
            step = (segment, link.digest(), link.hexdigest())
            _remember_step(step_key, step)
        segment, prev_digest, prev = step
        segments.append(segment)
        chained.append(prev)
        num_tokens += tokens
    model = body.get("modelId" if api == "bedrock_converse" else "model")
    return RequestFingerprint(
        api=api,
        model=model if isinstance(model, str) else None,
        segments=segments,
        chained=chained,
        prefix_hash=prev,
        breakpoints=[Breakpoint(b.path, b.ttl, b.segment_index) for b in texts.breakpoints],
        approx_prefix_tokens=num_tokens,
    )


@dataclass(frozen=True)
class PromptTexts:
    """A body's prefix segments, split and serialised but not yet hashed or counted: what a
    router needs to cut the prompt stream into chunks (``texts``), at a fraction of a whole
    fingerprint's cost (no token counting, no SHA-256 chain). ``fingerprint_request(body, api,
    texts)`` completes it.

    Attributes:
        api: the API the body was read as (one of ``APIS``).
        segments: the raw segments, in prefix order (cache markers removed).
        breakpoints: the cache markers found, in body order.
        texts: each segment's canonical JSON text (``Segment.text``), in prefix order.
    """

    api: str
    segments: list[RawSegment]
    breakpoints: list[RawBreakpoint]
    texts: list[str]
    #: per segment, its UTF-8 bytes (serialised here) or the memo's (text, digest, hex digest)
    _known: list[bytes | tuple[str, bytes, str]] = field(repr=False, compare=False)


def prompt_texts(body: Mapping[str, Any], api: str = "auto") -> PromptTexts:
    """Split ``body`` into its prefix segments and serialise each (see ``PromptTexts``);
    messages seen recently come from the fingerprint's memo without serialising them again.

    Raises:
        RequestShapeError: unknown ``api``, undetectable body or wrong container types.
        CanonicalizationError: a value has no canonical JSON form (NaN, Infinity...).
    """
    if api == "auto":
        api = detect_api(body)
    raw_segments, raw_breakpoints = split_request(body, api)
    texts: list[str] = []
    known_list: list[bytes | tuple[str, bytes, str]] = []
    memo = _SEGMENTS_BY_MESSAGE
    for raw in raw_segments:
        key = _message_key(raw.value)
        known = memo.get(key) if key is not None else None
        if known is None:
            try:
                text, data = canonical_json_and_bytes(raw.value)
            except CanonicalizationError as exc:
                raise CanonicalizationError(_at_segment(str(exc), raw.path)) from None
            texts.append(text)
            known_list.append(data)
        else:
            texts.append(known[0])
            known_list.append(known)
    return PromptTexts(api, raw_segments, raw_breakpoints, texts, known_list)


def _at_segment(message: str, path: str) -> str:
    """``message`` of a segment's ``CanonicalizationError`` located in the whole request body: its
    JSON path starts at the segment (``$.content[0]``), so ``$`` becomes the segment's own path
    (``messages[1].content[0]``); a message without a path is prefixed with the segment's."""
    if message.startswith("$"):
        return path + message[1:]
    return f"{path}: {message}"


def _message_key(value: Any) -> tuple[str, str] | None:
    """``(role, content)`` of a segment value that is exactly ``{"role": str, "content": str}``
    (a chat or system message as parsed from JSON), whose canonical text those two strings fix;
    None for any other value or a content over ``_SEGMENT_MEMO_MAX_CHARS``."""
    if type(value) is dict and len(value) == 2:
        role = value.get("role")
        content = value.get("content")
        if type(role) is str and type(content) is str and len(content) <= _SEGMENT_MEMO_MAX_CHARS:
            return role, content
    return None


def _remember_message(key: tuple[str, str], known: tuple[str, bytes, str]) -> None:
    """Keep a message segment's (canonical text, SHA-256 digest, hex digest), the oldest entries
    dropped beyond ``_SEGMENT_MEMO_CHARS`` characters (content and text) in all."""
    global _segment_memo_chars
    size = len(key[1]) + len(known[0])
    with _SEGMENT_MEMO_LOCK:
        if key in _SEGMENTS_BY_MESSAGE or size > _SEGMENT_MEMO_CHARS:
            return
        while _SEGMENTS_BY_MESSAGE and _segment_memo_chars + size > _SEGMENT_MEMO_CHARS:
            old_key, old = _SEGMENTS_BY_MESSAGE.popitem_first()
            _segment_memo_chars -= len(old_key[1]) + len(old[0])
        _SEGMENTS_BY_MESSAGE[key] = known
        _segment_memo_chars += size


def _remember_step(key: _StepKey, step: tuple[Segment, bytes, str]) -> None:
    """Keep one chain step of ``fingerprint_request``; the memo is emptied when its segments'
    texts would pass ``_STEPS_CHARS`` characters in all, or it would hold ``_STEPS_MAX``
    steps."""
    global _steps_chars
    size = step[0].num_chars
    with _STEPS_LOCK:
        if key in _STEPS or size > _STEPS_CHARS:
            return
        if _steps_chars + size > _STEPS_CHARS or len(_STEPS) >= _STEPS_MAX:
            _STEPS.clear()
            _steps_chars = 0
        _STEPS[key] = step
        _steps_chars += size


#: (the previous link's digest, path, kind, the segment's digest, its tokens)
_StepKey = tuple[bytes, str, str, bytes, int]
#: ``fingerprint_request``'s chain steps: per ``_StepKey``, the ``Segment`` (frozen, shared by
#: the fingerprints that repeat it) and the chain's next digest and hex digest. A proxy
#: fingerprints every turn of a conversation, whose earlier turns repeat the same steps.
_STEPS: dict[_StepKey, tuple[Segment, bytes, str]] = {}
_STEPS_MAX = 65_536
_STEPS_CHARS = 16_000_000
_STEPS_LOCK = threading.Lock()
_steps_chars = 0


def _segment_tokens(sha: str, kind: str, value: Any, text: str) -> int:
    """Approximate tokens of one segment, memoised by its hash.

    A proxy fingerprints every request, and the frozen segments repeat from one request to the
    next; tokenizing only unseen segments keeps a warm call close to the cost of hashing. An
    unseen segment that starts as one seen before (a shared document, then a new question, in
    one message) reuses the counts of its shared pieces (``count_tokens_reusing``).
    """
    cached = _TOKENS_BY_SHA.get(sha)
    if cached is None:
        counted = text if kind == "tools" else "\n".join(_prompt_strings(value))
        cached = count_tokens_reusing(counted)
        with _TOKENS_LOCK:
            if len(_TOKENS_BY_SHA) >= _TOKENS_CACHE_SIZE:
                del _TOKENS_BY_SHA[next(iter(_TOKENS_BY_SHA))]  # drop the oldest entry
            _TOKENS_BY_SHA[sha] = cached
    return cached


_TOKENS_BY_SHA: dict[str, int] = {}
_TOKENS_CACHE_SIZE = 4096
_TOKENS_LOCK = threading.Lock()


class _Memo(dict[tuple[str, str], tuple[str, bytes, str]]):
    def popitem_first(self) -> tuple[tuple[str, str], tuple[str, bytes, str]]:
        key = next(iter(self))
        return key, self.pop(key)


#: Message segments seen recently, by ``(role, content)`` (``_message_key``): their canonical
#: text and its SHA-256, so that the messages a conversation repeats on every turn (its system
#: prompt, its earlier turns) are not serialised and hashed again on each request. A proxy
#: fingerprints every request it forwards; bounded by characters, oldest entries dropped first.
_SEGMENTS_BY_MESSAGE = _Memo()
_SEGMENT_MEMO_CHARS = 16_000_000
_SEGMENT_MEMO_MAX_CHARS = 1_000_000
_SEGMENT_MEMO_LOCK = threading.Lock()
_segment_memo_chars = 0


def _prompt_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key not in _UNCOUNTED_KEYS:
                out.extend(_prompt_strings(item))
    elif isinstance(value, list):
        for item in value:
            out.extend(_prompt_strings(item))
    return out


@dataclass(frozen=True)
class Divergence:
    """Where two fingerprints first differ.

    Attributes:
        index: index of the first differing segment (in both requests' prefix order).
        change: ``"changed"`` (both have a segment there, hashes differ), ``"added"`` (only the
            new request has it) or ``"removed"`` (only the old one has it).
        segment_path: that segment's path in the new request (the old one's when removed).
        path: JSON path of the first differing value inside it, e.g. ``system[1].text``
            (equals ``segment_path`` for added/removed segments). When the two requests hold
            segments of different places at ``index`` (a tool or system block added or removed
            there: ``tools[1]`` in the old request, ``system[0]`` in the new), the path of
            the segment added (``segment_path``, when the old request's segment at ``index``
            comes later in the new one) or else removed (``old_segment_path``).
        offset: character offset of the first differing character in the segment's canonical
            JSON text (0 for added/removed segments); internal: users see ``field_offset``.
        field_offset: character offset of the first differing character inside the differing
            string value (the text the user wrote) when ``path`` ends at a string in both
            requests, else None.
        before: excerpt of the old canonical text around ``offset`` ("" when added), never
            starting or ending inside a JSON escape.
        after: excerpt of the new canonical text around ``offset`` ("" when removed).
        text_before, text_after: with ``field_offset``, 30 characters of each string on each
            side of it, as written (newlines shown as ``⏎``: :func:`promptcache.changed_value.
            text_excerpt`); else None.
        value: with ``field_offset``, the value holding the first difference (its start in the
            string, both sides, and its kind: a time, a date, an id...); else None.
        old_segment_path: the old request's segment path at ``index`` when it differs from
            ``segment_path`` (segments of different places there); else None.
    """

    index: int
    change: Literal["changed", "added", "removed"]
    segment_path: str
    path: str
    offset: int
    field_offset: int | None
    before: str
    after: str
    text_before: str | None = None
    text_after: str | None = None
    value: ChangedValue | None = None
    old_segment_path: str | None = None

    def describe(self) -> str:
        """One line for logs and the CLI. Positions count characters of the text the user
        wrote (the string at ``path``), from 0, at the start of the changed value, e.g.
        ``system[0].text changed at char 14 of the text (a time: '09:00' -> '09:05'): ...``;
        a change outside any string (a key added, a number) shows the canonical JSON around
        it."""
        if self.change != "changed":
            return f"segment {self.index} ({self.segment_path}) {self.change}"
        if self.old_segment_path is not None:
            return (
                f"segment {self.index} was {self.old_segment_path}, now {self.segment_path} "
                f"(segments added or removed at or before it): {self.before!r} -> {self.after!r}"
            )
        if self.value is None or self.text_before is None:
            return f"{self.path} changed: {self.before!r} -> {self.after!r}"
        value = self.value
        kind = f" ({value.kind}: {value.before!r} -> {value.after!r})" if value.kind else ""
        return (
            f"{self.path} changed at char {value.start} of the text{kind}: "
            f"{self.text_before!r} -> {self.text_after!r}"
        )


def first_divergence(old: RequestFingerprint, new: RequestFingerprint) -> Divergence | None:
    """The first segment at which ``new`` stops sharing ``old``'s prefix, or None if equal.

    Segments are compared by hash, index by index. When every common segment matches but the
    counts differ, the first extra segment is reported as ``added`` (``new`` extends ``old``:
    usually history growing, which caching expects) or ``removed``.

    Raises:
        TypeError: ``old`` or ``new`` is not a ``RequestFingerprint`` (a request body, say, or
            None where there is no earlier request yet).
    """
    for name, value in (("old", old), ("new", new)):
        if value is None:
            raise TypeError(
                f"first_divergence() compares two fingerprints: {name} is None, not a "
                "fingerprint: with no earlier request there is nothing to compare; compare only "
                "once both requests' fingerprint_request(body) results exist"
            )
        if not isinstance(value, RequestFingerprint):
            raise TypeError(
                f"first_divergence() compares fingerprints: {name} is a {type(value).__name__}; "
                "pass fingerprint_request(body) results, e.g. "
                "first_divergence(fingerprint_request(old_body), fingerprint_request(new_body))"
            )
    for index, (a, b) in enumerate(zip(old.segments, new.segments, strict=False)):
        if a.sha256 != b.sha256:
            offset = common_prefix_len(a.text, b.text)
            if a.path != b.path:
                # segments of different places (one added or removed before): no key of one is
                # a key of the other, so nothing inside them is compared. The path is the
                # segment added (the new request holds the old one's further on) or else the
                # segment removed.
                inserted = any(s.path == a.path for s in new.segments[index + 1 :])
                return Divergence(
                    index=index,
                    change="changed",
                    segment_path=b.path,
                    path=b.path if inserted else a.path,
                    offset=offset,
                    field_offset=None,
                    before=_excerpt(a.text, offset),
                    after=_excerpt(b.text, offset),
                    old_segment_path=a.path,
                )
            path, strings = _deepest_difference(a.path, json.loads(a.text), json.loads(b.text))
            if strings is None:
                return Divergence(
                    index=index,
                    change="changed",
                    segment_path=b.path,
                    path=path,
                    offset=offset,
                    field_offset=None,
                    before=_excerpt(a.text, offset),
                    after=_excerpt(b.text, offset),
                )
            old_text, new_text = strings
            field_offset = common_prefix_len(old_text, new_text)
            return Divergence(
                index=index,
                change="changed",
                segment_path=b.path,
                path=path,
                offset=offset,
                field_offset=field_offset,
                before=_excerpt(a.text, offset),
                after=_excerpt(b.text, offset),
                text_before=text_excerpt(old_text, field_offset),
                text_after=text_excerpt(new_text, field_offset),
                value=changed_value(old_text, new_text, field_offset),
            )
    n = min(len(old.segments), len(new.segments))
    if len(new.segments) > n:
        seg = new.segments[n]
        return Divergence(n, "added", seg.path, seg.path, 0, None, "", _excerpt(seg.text, 0))
    if len(old.segments) > n:
        seg = old.segments[n]
        return Divergence(n, "removed", seg.path, seg.path, 0, None, _excerpt(seg.text, 0), "")
    return None


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings, in characters."""
    limit = min(len(a), len(b))
    lo, hi = 0, limit  # binary search on slices: fast for 100k-character segments
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _excerpt(text: str, offset: int) -> str:
    """Canonical JSON around ``offset``, cut so that it neither starts nor ends inside an escape
    (``\\n``, ``\\"``, ``\\u00e9``)."""
    start = _escape_boundary(text, max(0, offset - _EXCERPT_CHARS), forward=True)
    end = _escape_boundary(text, min(len(text), offset + _EXCERPT_CHARS), forward=False)
    return text[start:end]


def _escape_boundary(text: str, cut: int, *, forward: bool) -> int:
    """``cut`` moved off any JSON escape it falls inside: forward past it (an excerpt's start)
    or back before it (an excerpt's end)."""
    for start in range(cut - 1, max(-1, cut - 6), -1):  # an escape is at most 6 characters
        if text[start] != "\\":
            continue
        backslashes = 0
        while start - backslashes - 1 >= 0 and text[start - backslashes - 1] == "\\":
            backslashes += 1
        if backslashes % 2:  # this backslash is itself escaped: no escape starts here
            continue
        length = 6 if start + 1 < len(text) and text[start + 1] == "u" else 2
        if start < cut < start + length:
            return start + length if forward else start
        break
    return cut


def _first_mismatch(a: list[Any], b: list[Any]) -> int:
    """Index of the first differing item, or the shorter length when one extends the other."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _deepest_difference(path: str, a: Any, b: Any) -> tuple[str, tuple[str, str] | None]:
    """Follow the first differing key/index down both values; return its path and, when it
    ends at a string in both, the two strings.

    Keys are visited in sorted order, the order of the canonical text.
    """
    while True:
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(a.keys() | b.keys())
            key = next((k for k in keys if a.get(k, _MISSING) != b.get(k, _MISSING)), None)
            if key is None:  # equal as Python values, e.g. 1 vs 1.0: stop here
                return path, None
            path = f"{path}.{key}"
            if key not in a or key not in b:
                return path, None
            a, b = a[key], b[key]
        elif isinstance(a, list) and isinstance(b, list):
            i = _first_mismatch(a, b)
            path = f"{path}[{i}]"
            if i >= len(a) or i >= len(b):
                return path, None
            a, b = a[i], b[i]
        elif isinstance(a, str) and isinstance(b, str):
            return path, (a, b)
        else:
            return path, None


_MISSING = object()
