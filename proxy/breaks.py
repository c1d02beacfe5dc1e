"""Cache-break explanation: why did this request not read the previous one's cached prefix?

For each successful request the explainer finds the *previous request in the same prefix family*
and records, in the ``break_*`` columns of its row, the first diverging segment, a reason code,
the character offset and (only when bodies are stored) a short redacted excerpt.

The explainer looks predecessors up by same ``key_fingerprint``, OpenAI ``prompt_cache_key`` (when
the request sends one: OpenAI routes caches by a prefix hash combined with it,
https://developers.openai.com/api/docs/guides/prompt-caching, checked 2026-11-30), ``cache_salt``
(when sent: our engine and vLLM never share blocks across salts), ``model`` and
``first_segment_hash``. Several users of one app share a family (same key, same frozen system
prompt), and the cache serves any earlier prefix that is still live, not just the last request's:
so the explainer keeps up to :data:`SNAPSHOTS_PER_FAMILY` recent snapshots per family and compares
a request with the one sharing its *longest cached prefix* (the latest of equals). A request that
extends an earlier live prefix is not a break, whoever went just before. When a request opens a
new family, two fallbacks still find its predecessor so that the usual breakers are named instead
of hidden as ``new_prefix``:

1. the latest request with the same key and first segment but another model -> ``model_changed``;
2. the latest request with the same key, model and API, if it is *related*: segments making up at
   least half of its characters reappear unchanged (a reordered tool list), or its first changed
   segment keeps at least :data:`RELATED_MIN_COMMON_CHARS` characters in common before the
   change (a timestamp at the end of ``system[0]``), or lines and sentences it shares with the
   request make up at least half of it (a time and a request id at the very start of the
   instructions, the user's name at their end).

Each request then joins its predecessor's *prefix family* (``prefix_family``, the first segment
hash of the first request of the chain), or opens its own: the requests that share their
longest prefix are one family in the report, so an app that writes the time at the top of its
system prompt is one family with its breaks, not one family per request.

Reason codes (:data:`BREAK_REASONS`), first match wins:

=====================  ========================================================================
``below_minimum``      prompt tokens (the upstream's count from its usage, else the
                       ``cl100k_base`` estimate) < the model's minimum cacheable prefix
                       (``promptcache.minimums``; for the engine and other self-hosted
                       upstreams without a table row, one KV block plus the recomputed last
                       token, :data:`ENGINE_MIN_TOKENS`) and the vendor reported no cache read
                       or write
``breakpoint_missing`` Anthropic/Bedrock request without any ``cache_control``/``cachePoint``
                       and no cache activity (those APIs cache nothing unasked)
``new_prefix``         no predecessor (first request of a family)
``model_changed``      predecessor found through fallback 1
``tools_reordered``    first change in a tool, and the set of tool hashes is unchanged
``tools_changed``      first change in a tool definition (or ``response_format``)
``system_changed``     first change in a system block / system or developer message
``messages_changed``   one message edited in place; the old messages after it are unchanged
``history_rewritten``  messages dropped, inserted, reordered or truncated
``anchor_changed``     ``messages_changed`` where the one edited message differs only by one
                       content block inserted or removed (a synthetic whitespace anchor that
                       appears and disappears, VS Code issue #323642): a *structural* change,
                       no text was edited
``ttl_expired``        same cached prefix, but the gap since the predecessor > its TTL and the
                       vendor reported no cache read; never for a self-hosted upstream
                       (``engine``, ``openai_compatible``: LRU caches with no TTL)
``lookback_exceeded``  same cached prefix within the TTL, but no breakpoint of the request lies
                       within 20 block positions after the predecessor's last written
                       breakpoint (Anthropic's lookback window, ``promptcache.lookback``), so
                       the write is not found; ``break_excerpt`` names the positions appended
                       and the fix
``breakpoint_moved``   same cached prefix within the TTL, but the request's last breakpoint lies
                       before the predecessor's: it reads less than it could
=====================  ========================================================================

The two lookback reasons apply to Anthropic requests and to Bedrock Converse requests for Claude
models (``promptcache.lookback.lookback_applies``: AWS documents the lookback for Claude only,
https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html , checked 2026-12-01);
positions are content blocks with a run of tool_use/tool_result blocks counted as one
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching , checked 2026-12-01).
They are only given when the request's block positions can be counted (its text is known);
``break_segment`` is the request's breakpoint concerned and ``break_excerpt`` a sentence with the
numbers (no prompt text, so it is filled whether or not bodies are stored).

Tokens lost (:func:`tokens_lost`, the same definition as ``proxy/rollup.py``): for the
structural reasons (:data:`READS_KEPT_REASONS`) the cap is the predecessor's cached tokens less
what the request still read, since such a request may keep reading an earlier breakpoint.

A change after the predecessor's last breakpoint (Anthropic/Bedrock) is not a break: nothing was
cached there. Appended segments (history growing) are never breaks, and neither is a request
whose first change is its own last message: the new question of a stateless app, or the first
turn of a new conversation that shares the system prompt (and session layer) of a longer one.
Where the upstream caches every prefix by itself (not Anthropic's or Bedrock's breakpoints), a
request that only leaves out the predecessor's last messages is no break either: it reads all
it shares with the predecessor and has nothing more (a new conversation whose first turn is the
longer one's).

TTL of the predecessor's cache entry: 5 min (the vendors' default), 1 h when any of its
breakpoints says ``"ttl": "1h"``, 30 min for OpenAI's explicit ``prompt_cache_breakpoint``;
none for the engine upstream (LRU eviction). Anthropic counts lifetime from the start of the
request (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, checked 2026-11-30).

Cross-check: a request with no break (same prefix, within the TTL, predecessor's first byte
already back so its write had landed) is ``expected_hit``; if the vendor then reports 0 cache-read
tokens it is flagged ``unexpected_miss``. A request whose only message is new (its dynamic tail)
shares no whole segment: it is ``expected_hit`` only where the upstream caches every prefix by
itself (not Anthropic's or Bedrock's breakpoints, which cache whole blocks) and the start of
that message it kept reaches the minimum cacheable prefix (:func:`_kept_text_tokens`).
Anthropic's own ``cache_miss_reason`` is stored beside ours by the proxy
(``vendor_miss_reason``, ``proxy/diagnostics.py``).

State: up to :data:`SNAPSHOTS_PER_FAMILY` snapshots (fingerprints with segment texts) per family,
a snapshot dropped once a later one extends its cached prefix, in an LRU bounded by families and
by retained characters; :meth:`BreakExplainer.load` rebuilds it from the log on start. A
snapshot rebuilt without a stored body has hashes only: breaks are still found and classified,
but ``break_offset`` / ``break_excerpt`` stay NULL.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import logging
import re
import sqlite3
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from promptcache.errors import PromptCacheError, StoreError
from promptcache.fingerprint import (
    Breakpoint,
    RequestFingerprint,
    Segment,
    fingerprint_request,
    first_divergence,
)
from promptcache.lookback import check_lookback, lookback_applies, single_block_edit
from promptcache.minimums import ModelMinimums, default_model_minimums
from promptcache.ttl import LIFETIME_S

from .dialect import is_postgres_url
from .redact import redact_text

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from .record import RequestRecord

__all__ = [
    "BREAK_REASONS",
    "BreakExplainer",
    "BreakExplanation",
    "PrefixSnapshot",
    "classify_change",
    "install",
    "routing_key",
    "tokens_lost",
]

logger = logging.getLogger(__name__)

BREAK_REASONS: Final[tuple[str, ...]] = (
    "tools_changed",
    "tools_reordered",
    "system_changed",
    "model_changed",
    "history_rewritten",
    "messages_changed",
    "ttl_expired",
    "anchor_changed",
    "lookback_exceeded",
    "breakpoint_moved",
    "below_minimum",
    "breakpoint_missing",
    "new_prefix",
)

#: The reason logged for the first request of a prefix family: not a break (nothing earlier
#: could be reused); the report counts it as new prefixes, /metrics as promptcache_new_prefixes.
NOT_A_BREAK: Final = "new_prefix"

#: Reasons whose tokens lost are the predecessor's cached tokens less the request's own reads
#: (see ``proxy/rollup.py``); must match ``rollup._READS_KEPT``.
READS_KEPT_REASONS: Final = ("anchor_changed", "lookback_exceeded", "breakpoint_moved")

#: APIs that cache only at explicit breakpoints (Anthropic ``cache_control``, Bedrock
#: ``cachePoint``); the others cache automatically from token 0.
EXPLICIT_BREAKPOINT_APIS: Final = frozenset({"anthropic", "bedrock_converse"})
DEFAULT_TTL_S: Final = LIFETIME_S["5m"]
#: None: the vendor fixes the TTL (1800 s assumed).
TTL_SECONDS: Final[dict[str | None, float]] = {
    **{ttl: seconds for ttl, seconds in LIFETIME_S.items()},
    None: 1800.0,
}
#: A changed first segment still counts as "the same prompt, edited" with this much in common.
RELATED_MIN_COMMON_CHARS: Final = 32
#: Recent snapshots kept per prefix family (distinct live prefixes, e.g. concurrent sessions).
SNAPSHOTS_PER_FAMILY: Final = 32

#: Self-hosted engines (ours, vLLM) cache whole KV blocks only and always recompute the last
#: prompt token, so a prompt of at most one block (16 tokens, both engines' default
#: ``--block-size``) never reads the cache
#: (https://docs.vllm.ai/en/latest/design/prefix_caching.html, checked 2026-11-30).
ENGINE_BLOCK_TOKENS: Final = 16
ENGINE_MIN_TOKENS: Final = ENGINE_BLOCK_TOKENS + 1
#: Vendors served by a self-hosted engine (see ``proxy.config.VENDORS``).
SELF_HOSTED_VENDORS: Final = frozenset({"engine", "openai_compatible"})

#: Models whose minimum cacheable prefix is kept looked up (distinct model ids seen).
MAX_MINIMUM_CACHE: Final = 1024

#: Route endings of requests that only count a prompt's tokens (Anthropic's
#: ``/v1/messages/count_tokens``, Gemini's ``:countTokens``): they read and write no cache, so
#: they are neither explained nor any request's predecessor.
COUNT_ONLY_ROUTES: Final = ("/count_tokens", ":countTokens")


def counts_tokens_only(route: str | None) -> bool:
    """Whether a request on ``route`` only counts tokens (see :data:`COUNT_ONLY_ROUTES`)."""
    return route is not None and route.endswith(COUNT_ONLY_ROUTES)


#: (key fingerprint, prompt_cache_key and cache_salt as `routing_key` joins them): whose cache
#: entries a request can read.
CacheScope = tuple[str | None, str | None]
#: (cache scope, model, first segment hash).
FamilyKey = tuple[CacheScope, str | None, str | None]


@dataclass(frozen=True)
class PrefixSnapshot:
    """What the explainer remembers of one request to compare the next one against.

    Attributes:
        request_id: the row's id.
        started_at: unix seconds.
        ready_at: unix seconds from which its cache write is readable (first byte, else end).
        vendor: the ``vendor`` column (``engine`` and ``openai_compatible`` have no TTL).
        fingerprint: its segments; texts are empty when ``has_text`` is False.
        has_text: whether segment texts are known (offsets and excerpts need them).
        routing_key: OpenAI's ``prompt_cache_key`` and the engine's ``cache_salt``
            (:func:`routing_key`), when the request sent either.
        cached_tokens: tokens its cache entry holds, for the next request's tokens lost: cache
            reads + writes where writes are reported (explicit breakpoints), else its whole
            input (automatic caching); None when its usage is unknown.
        prefix_family: see :attr:`BreakExplanation.prefix_family` (set when explained).
    """

    request_id: str
    started_at: float
    ready_at: float
    vendor: str | None
    key_fingerprint: str | None
    fingerprint: RequestFingerprint
    has_text: bool
    routing_key: str | None = None
    cached_tokens: int | None = None
    #: the prefix family this request belongs to: the first segment hash of the first request
    #: of its chain of predecessors (its own when it has none); None until explained
    prefix_family: str | None = None

    @property
    def model(self) -> str | None:
        return self.fingerprint.model

    @property
    def scope(self) -> CacheScope:
        return (self.key_fingerprint, self.routing_key)

    @property
    def family(self) -> FamilyKey:
        segments = self.fingerprint.segments
        return (self.scope, self.model, segments[0].sha256 if segments else None)

    @property
    def ttl_s(self) -> float | None:
        """Lifetime in seconds of this request's cache entry (None: no TTL, a self-hosted
        upstream: the engine's, vLLM's and SGLang's prefix caches evict by LRU, not by time)."""
        if self.vendor in SELF_HOSTED_VENDORS:
            return None
        ttls = [TTL_SECONDS.get(bp.ttl, DEFAULT_TTL_S) for bp in self.fingerprint.breakpoints]
        return max(ttls, default=DEFAULT_TTL_S)

    @functools.cached_property  # the fields never change: computed once per snapshot
    def cached_extent(self) -> int:
        """Index of the last segment its cache entry covers (-1: nothing cached)."""
        fp = self.fingerprint
        if fp.api in EXPLICIT_BREAKPOINT_APIS:
            return max((bp.segment_index for bp in fp.breakpoints), default=-1)
        return len(fp.segments) - 1

    @functools.cached_property
    def num_chars(self) -> int:
        """Characters of its segment texts held in memory (0 when ``has_text`` is False)."""
        return sum(len(seg.text) for seg in self.fingerprint.segments)

    def shared_prefix_chars(self, new: RequestFingerprint) -> int:
        """Characters of the segments that ``new`` repeats from the start of this snapshot's
        cached prefix (by hash; 0 when even the first segment differs)."""
        shared = 0
        segments = self.fingerprint.segments[: self.cached_extent + 1]
        for old_seg, new_seg in zip(segments, new.segments, strict=False):
            if old_seg.sha256 != new_seg.sha256:
                break
            shared += old_seg.num_chars
        return shared

    def extended_by(self, later: PrefixSnapshot) -> bool:
        """Whether ``later`` carries this snapshot's whole cached prefix and caches at least as
        far, so that comparing with ``later`` is always as good."""
        if later.cached_extent < self.cached_extent:
            return False
        return _first_change_by_hash(self.fingerprint, later.fingerprint) is None


@dataclass(frozen=True)
class BreakExplanation:
    """The break columns of one request (None where not applicable).

    Attributes:
        reason: a :data:`BREAK_REASONS` code, or None when the request kept the cached prefix.
        segment: JSON path of the first change (``system[0].text``, ``tools[2]``).
        offset: character offset of the first differing character in the text at ``segment``
            (the string the user wrote, ``Divergence.field_offset``); None when the change is
            not inside a string (a key added, a number changed).
        excerpt: ``"-<before>\\n+<after>"``, redacted; only when bodies are stored: 30
            characters of the user's text on each side of ``offset`` (newlines shown as
            ``⏎``), or of the canonical JSON (cut outside escapes) when ``offset`` is None.
        previous_request_id: the predecessor compared against.
        expected_hit: same prefix within the TTL after the predecessor's write landed.
        gap_s: seconds since the predecessor started.
        tokens_lost: input tokens the request could have read from the predecessor's cache but
            prefilled again (:func:`tokens_lost`); None without a reason or usage.
        prefix_family: the request's prefix family: its predecessor's (so a chain of edits of
            one prompt is one family, whatever its first segment), else its own first
            segment's hash.
    """

    reason: str | None
    segment: str | None = None
    offset: int | None = None
    excerpt: str | None = None
    previous_request_id: str | None = None
    expected_hit: bool = False
    gap_s: float | None = None
    tokens_lost: int | None = None
    prefix_family: str | None = None


def tokens_lost(
    reason: str | None, total_input: int | None, read: int | None, cached_before: int | None
) -> int | None:
    """Tokens a break lost: the request's input not read from cache, capped at what its
    predecessor had in cache (``cached_before``; less the request's own reads for
    :data:`READS_KEPT_REASONS`). None for no break, ``new_prefix`` or unknown usage; the same
    arithmetic as ``proxy/rollup.py`` (a test compares the two).

    Units: tokens.
    """
    if reason is None or reason == "new_prefix" or total_input is None:
        return None
    if reason == "below_minimum":  # never served from cache: a stable prefix saves nothing
        return 0
    got = read or 0
    cap = cached_before or 0
    if reason in READS_KEPT_REASONS:
        cap -= got
    return max(0, min(total_input - got, cap))


def cached_tokens_of(
    api: str | None,
    breakpoints: str | None,
    total_input: int | None,
    read: int | None,
    writes: int | None,
) -> int | None:
    """What a request's cache entry holds (see ``PrefixSnapshot.cached_tokens``), in tokens."""
    if total_input is None:
        return None
    if api in EXPLICIT_BREAKPOINT_APIS or (breakpoints or "[]") != "[]" or (writes or 0) > 0:
        return (read or 0) + (writes or 0)
    return total_input


def _tool_hashes(fp: RequestFingerprint) -> list[str]:
    return [seg.sha256 for seg in fp.segments if seg.kind == "tools"]


def _first_change_by_hash(old: RequestFingerprint, new: RequestFingerprint) -> int | None:
    """Index of the first segment that differs or is missing in ``new`` (None: ``new`` extends
    ``old``). Hash-only: works on snapshots rebuilt without texts."""
    for index, seg in enumerate(old.segments):
        if index >= len(new.segments) or new.segments[index].sha256 != seg.sha256:
            return index
    return None


def classify_change(old: RequestFingerprint, new: RequestFingerprint, index: int) -> str:
    """Reason code for a prefix whose first change is at segment ``index`` of ``old``.

    Args:
        old, new: fingerprints of the predecessor and the request.
        index: first index where ``new`` no longer carries ``old``'s segment.

    Returns:
        ``tools_reordered``, ``tools_changed``, ``system_changed``, ``messages_changed`` or
        ``history_rewritten`` (see the module docstring).
    """
    kind = old.segments[index].kind
    if kind == "tools":
        old_tools, new_tools = _tool_hashes(old), _tool_hashes(new)
        if old_tools != new_tools and Counter(old_tools) == Counter(new_tools):
            return "tools_reordered"
        return "tools_changed"
    if kind == "system":
        return "system_changed"
    if index >= len(new.segments):
        return "history_rewritten"
    rest_old = [s.sha256 for s in old.segments[index + 1 :]]
    rest_new = [s.sha256 for s in new.segments[index + 1 : len(old.segments)]]
    return "messages_changed" if rest_old == rest_new else "history_rewritten"


def _shared_segments(old: RequestFingerprint, new: RequestFingerprint) -> int:
    """How many leading segments ``new`` repeats from ``old`` (by hash)."""
    count = 0
    for old_seg, new_seg in zip(old.segments, new.segments, strict=False):
        if old_seg.sha256 != new_seg.sha256:
            break
        count += 1
    return count


def _tail_replaced(old: RequestFingerprint, new: RequestFingerprint, index: int) -> bool:
    """Whether the first change is the request's own last segment, a message, where ``old``
    had a message too: the dynamic tail of a stateless app (same system prompt, a new question
    each time), or the first turn of a new session or conversation after a longer one (the
    frozen and session layers, then a new first question). Not a break: everything before that
    message is still read, and the request has nothing after it that could have been."""
    return (
        index == len(new.segments) - 1
        and new.segments[index].kind == "messages"
        and old.segments[index].kind == "messages"
    )


def _kept_text_tokens(old: PrefixSnapshot, new: PrefixSnapshot) -> float:
    """Approximate tokens at the start of ``new``'s first segment that ``old``'s first segment
    has too: the part of a changed lone message (a legacy completions ``prompt``, a chat
    request of one user message) that an automatic prefix cache can still read. Its
    ``cl100k_base`` count scaled by the share of its characters kept; 0 when either text is
    unknown (a snapshot rebuilt without a stored body) or the count is."""
    old_segments, new_segments = old.fingerprint.segments, new.fingerprint.segments
    if not (old.has_text and new.has_text and old_segments and new_segments):
        return 0.0
    a, b = old_segments[0].text, new_segments[0]
    if b.num_tokens is None or not b.num_chars:
        return 0.0
    low, high = 0, min(len(a), len(b.text))  # the longest common start, by slices (C speed)
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b.text[:mid]:
            low = mid
        else:
            high = mid - 1
    return b.num_tokens * low / b.num_chars


def _tail_dropped(old: RequestFingerprint, new: RequestFingerprint, index: int) -> bool:
    """Whether the request repeats every one of its segments from ``old`` and only leaves out
    ``old``'s last messages (a new conversation that starts as ``old`` did, a retry of an
    earlier turn), where the upstream caches every prefix by itself (not Anthropic's or
    Bedrock's breakpoints, which cache only where they are placed). Not a break: the request
    reads all it shares with ``old``, and it has nothing more."""
    return (
        index == len(new.segments)
        and old.segments[index].kind == "messages"
        and new.api not in EXPLICIT_BREAKPOINT_APIS
    )


def _related(old: PrefixSnapshot, new: RequestFingerprint) -> bool:
    """Whether ``new`` looks like an edit of ``old`` (see the module docstring, fallback 2)."""
    kept = {s.sha256 for s in new.segments}
    total = sum(s.num_chars for s in old.fingerprint.segments)
    shared = sum(s.num_chars for s in old.fingerprint.segments if s.sha256 in kept)
    if total and shared * 2 >= total:
        return True
    if not old.has_text or not old.fingerprint.segments or not new.segments:
        return False
    divergence = first_divergence(old.fingerprint, new)
    if divergence is None or divergence.change != "changed":
        return False
    common = divergence.offset if divergence.field_offset is None else divergence.field_offset
    if common >= RELATED_MIN_COMMON_CHARS:
        return True
    # per-request values at the very start (a time, a request id) and elsewhere (the user's
    # name at the end), the instructions between: most of the segment's lines are the same
    a = old.fingerprint.segments[divergence.index].text
    b = new.segments[divergence.index].text
    shared = _shared_line_chars(a, b)
    return shared * 2 >= max(len(a), len(b)) and shared >= RELATED_MIN_COMMON_CHARS


#: Where the relatedness check cuts a text: a newline (``\\n`` in canonical JSON) or a space
#: after a sentence's end.
_PIECES: Final = re.compile(r"\\n|(?<=[.!?]) ")


def _shared_line_chars(a: str, b: str) -> int:
    """Characters of ``a``'s lines and sentences (:data:`_PIECES`) that ``b`` has too, each
    piece of ``b`` matched once."""
    pieces = Counter(_PIECES.split(b))
    shared = 0
    for piece in _PIECES.split(a):
        if pieces[piece] > 0:
            pieces[piece] -= 1
            shared += len(piece) + 1
    return shared


def _excerpt(before: str, after: str) -> str:
    return redact_text(f"-{before}\n+{after}")


_T = TypeVar("_T")


def _replaced(obj: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` for this module's frozen dataclasses (no ``__post_init__``, no
    ``init=False`` fields): a copy of the instance's ``__dict__`` with ``changes``, in C calls.
    ``dataclasses.replace`` walks the fields in Python and calls ``__init__`` (about 15 us a
    snapshot). A snapshot's cached properties are copied too: they depend on its fingerprint
    and vendor, which the explainer never changes."""
    new = object.__new__(type(obj))
    vars(new).update(vars(obj), **changes)
    return new


def _started_at(snap: PrefixSnapshot) -> float:
    return snap.started_at


def routing_key(body: Any) -> str | None:
    """What, beside the API key, scopes the cache entries a request can read, from a parsed
    request body: OpenAI's ``prompt_cache_key``, and the ``cache_salt`` of our engine and vLLM
    (requests with different salts never share KV blocks, so each salt is a cache of its own);
    None when the body sends neither as text."""
    if not isinstance(body, dict):
        return None
    key, salt = body.get("prompt_cache_key"), body.get("cache_salt")
    key = key if isinstance(key, str) and key else None
    if not isinstance(salt, str) or not salt:
        return key
    return f"{key or ''}\x00cache_salt={salt}"  # NUL: no prompt_cache_key ends up the same


def family_id(first_segment_hash: str, key_for_routing: str | None) -> str:
    """The prefix family a request opens (no predecessor): its first segment's hash, or, for a
    request sent with a ``prompt_cache_key`` or ``cache_salt`` (``routing_key``), the SHA-256 of
    that key and the hash, so that each key and each salt, a cache of its own, is a family of
    its own in the report (its families, TTL advice, stored prefixes) as in the explainer."""
    if key_for_routing is None:
        return first_segment_hash
    joined = f"{key_for_routing}\x00{first_segment_hash}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(joined).hexdigest()


class _Lru(OrderedDict[Any, Any]):
    def touch(self, key: Any, value: Any, limit: int) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > limit:
            self.popitem(last=False)


class BreakExplainer:
    """Explains cache breaks request by request; call it as a proxy record hook.

    Args:
        max_families: prefix families remembered (LRU); older ones count as ``new_prefix``.
        max_text_chars: segment-text characters retained over all families (LRU eviction).
        minimums: the minimum-cacheable-prefix table (default: the SDK's bundled one).

    Thread-safe. :meth:`explain` is pure with respect to the record (returns the columns);
    calling the instance fills the record's ``break_*`` columns and never raises.
    """

    def __init__(
        self,
        *,
        max_families: int = 10_000,
        max_text_chars: int = 50_000_000,
        minimums: ModelMinimums | None = None,
    ) -> None:
        self.max_families = max_families
        self.max_text_chars = max_text_chars
        self.minimums = minimums if minimums is not None else default_model_minimums()
        # FamilyKey -> list[PrefixSnapshot], oldest first, at most SNAPSHOTS_PER_FAMILY
        self._families: _Lru = _Lru()
        self._by_first: _Lru = _Lru()  # (scope, first segment) -> FamilyKey (model switches)
        # (scope, model, api) -> FamilyKey (edited first segment): per API, so a chat request
        # in between does not hide the completions prompt a completions prompt edits
        self._by_model: _Lru = _Lru()
        self._chars = 0
        self._lock = threading.Lock()
        # model -> min_tokens: the table is immutable and scanning its fnmatch patterns costs
        # about 25 us per request; bounded by MAX_MINIMUM_CACHE (emptied when full)
        self._min_tokens: dict[str, int | None] = {}

    def __len__(self) -> int:
        return len(self._families)

    # ----------------------------------------------------------------------------------- state
    def remember(self, snap: PrefixSnapshot) -> None:
        """Add ``snap`` to its family's recent snapshots (dropping those it extends)."""
        with self._lock:
            self._remember(snap)

    def _remember(self, snap: PrefixSnapshot) -> None:
        family = snap.family
        # A family's snapshots are in start order, the oldest first (only this method writes
        # them), so no sort and no sums over the whole family are needed here.
        snaps: list[PrefixSnapshot] = self._families.get(family) or []
        started = snap.started_at
        for later in reversed(snaps):  # those started after it: the end of the list
            if later.started_at <= started:
                break
            if snap.extended_by(later):
                return  # an earlier request finished late: a later one already covers it
        kept = []
        dropped = 0  # characters of the snapshots no longer kept
        for s in snaps:
            if s.extended_by(snap):
                dropped += s.num_chars
            else:
                kept.append(s)
        if not kept or kept[-1].started_at <= started:
            kept.append(snap)
        else:  # after those started at the same time, where a stable sort puts it
            bisect.insort_right(kept, snap, key=_started_at)
        if len(kept) > SNAPSHOTS_PER_FAMILY:
            dropped += sum(s.num_chars for s in kept[:-SNAPSHOTS_PER_FAMILY])
            kept = kept[-SNAPSHOTS_PER_FAMILY:]
        self._chars += snap.num_chars - dropped
        self._families[family] = kept
        self._families.move_to_end(family)
        scope, model, first = family
        self._by_first.touch((scope, first), family, self.max_families)
        self._by_model.touch((scope, model, snap.fingerprint.api), family, self.max_families)
        while len(self._families) > 1 and (
            self._chars > self.max_text_chars or len(self._families) > self.max_families
        ):
            _, evicted = self._families.popitem(last=False)
            self._chars -= sum(s.num_chars for s in evicted)

    def _latest(self, family: FamilyKey | None) -> PrefixSnapshot | None:
        snaps = self._families.get(family)
        return snaps[-1] if snaps else None

    def _lookup(
        self, scope: CacheScope, fp: RequestFingerprint
    ) -> tuple[PrefixSnapshot | None, str]:
        first = fp.segments[0].sha256 if fp.segments else None
        snaps: list[PrefixSnapshot] | None = self._families.get((scope, fp.model, first))
        if snaps:  # the longest cached prefix this request repeats; the latest of equals
            best = snaps[0]
            most = best.shared_prefix_chars(fp)
            for snap in snaps[1:]:  # max() by (shared, started_at) without a key call each
                shared = snap.shared_prefix_chars(fp)
                if shared > most or (shared == most and snap.started_at > best.started_at):
                    best, most = snap, shared
            return best, "family"
        other = self._latest(self._by_first.get((scope, first)))
        if other is not None and other.model != fp.model:
            return other, "model"
        latest = self._latest(self._by_model.get((scope, fp.model, fp.api)))
        # only a request of the same API is an edit: a legacy completions prompt holding a chat
        # request's system text is another prompt (no template around it), not its system_changed
        if latest is not None and latest.fingerprint.api == fp.api and _related(latest, fp):
            return latest, "edited"
        return None, "none"

    def predecessor_id(
        self,
        key_fingerprint: str | None,
        fingerprint: RequestFingerprint,
        routing_key: str | None = None,
    ) -> str | None:
        """The request a request with ``fingerprint`` continues: the one the explainer would
        compare it with now (:meth:`explain`'s lookup), except that within its prefix family
        it is the one sharing the most leading segments with it, the latest of equals (the
        previous turn of its conversation, also when the cache ends before the messages and
        the explainer would take any request with that cached prefix). None when there is none,
        or when the request only puts another last message after that request's earlier
        segments (another conversation on the same prompt, or a stateless app's next question:
        no break to explain, ``_tail_replaced``). Reads the state only; ``--vendor-diagnostics``
        names that request's response to the vendor (``proxy/diagnostics.py``)."""
        with self._lock:
            previous, via = self._lookup((key_fingerprint, routing_key), fingerprint)
            if via == "family" and previous is not None:  # the previous turn of its conversation
                previous = max(
                    self._families[previous.family],
                    key=lambda s: (_shared_segments(s.fingerprint, fingerprint), s.started_at),
                )
        if previous is None:
            return None
        index = _first_change_by_hash(previous.fingerprint, fingerprint)
        if index is not None and _tail_replaced(previous.fingerprint, fingerprint, index):
            return None
        return previous.request_id

    # ----------------------------------------------------------------------------- explaining
    def explain(
        self,
        snap: PrefixSnapshot,
        *,
        cache_read_tokens: int | None,
        cache_write_tokens: int | None,
        with_excerpt: bool,
        prompt_tokens: int | None = None,
    ) -> BreakExplanation:
        """Explain one request against its predecessor, then remember it.

        Args:
            snap: the request (``has_text`` should be True for offsets and excerpts).
            cache_read_tokens, cache_write_tokens: the vendor's usage (None when unknown).
            with_excerpt: fill ``excerpt`` (only when bodies are stored).
            prompt_tokens: the prompt's size as the upstream counted it (its usage's total
                input tokens), compared with the minimum cacheable prefix instead of the
                fingerprint's ``cl100k_base`` estimate; None when the response had no usage.
        """
        with self._lock:
            previous, via = self._lookup(snap.scope, snap.fingerprint)
            result = self._explain(
                snap,
                previous,
                via,
                cache_read_tokens,
                cache_write_tokens,
                with_excerpt,
                prompt_tokens,
            )
            segments = snap.fingerprint.segments
            family = previous.prefix_family if previous is not None else None
            family = family or (
                family_id(segments[0].sha256, snap.routing_key) if segments else None
            )
            snap = _replaced(snap, prefix_family=family)
            self._remember(snap)
        lost = tokens_lost(
            result.reason,
            prompt_tokens,
            cache_read_tokens,
            previous.cached_tokens if previous is not None and result.previous_request_id else None,
        )
        return _replaced(result, tokens_lost=lost, prefix_family=snap.prefix_family)

    def _explain(
        self,
        snap: PrefixSnapshot,
        previous: PrefixSnapshot | None,
        via: str,
        read: int | None,
        write: int | None,
        with_excerpt: bool,
        prompt_tokens: int | None,
    ) -> BreakExplanation:
        fp = snap.fingerprint
        no_cache_activity = read is not None and not read and not write
        prev_id = previous.request_id if previous else None
        gap = snap.started_at - previous.started_at if previous else None
        minimum = self._minimum_tokens(fp.model, snap.vendor)
        # The upstream's own count when it gave one: the estimate can be far off for a model
        # with another tokenizer (a 15-token engine prompt is 24 cl100k tokens).
        tokens = prompt_tokens if prompt_tokens is not None else fp.approx_prefix_tokens
        if no_cache_activity and minimum is not None and tokens < minimum:
            return BreakExplanation("below_minimum", previous_request_id=prev_id, gap_s=gap)
        if no_cache_activity and fp.api in EXPLICIT_BREAKPOINT_APIS and not fp.breakpoints:
            return BreakExplanation("breakpoint_missing", previous_request_id=prev_id, gap_s=gap)
        if previous is None:
            return BreakExplanation("new_prefix")
        if via == "model":
            return BreakExplanation("model_changed", previous_request_id=prev_id, gap_s=gap)
        old = previous.fingerprint
        index = _first_change_by_hash(old, fp)
        if (
            index is not None
            and index <= previous.cached_extent
            and not _tail_replaced(old, fp, index)
            and not _tail_dropped(old, fp, index)
        ):
            segment: str | None = (
                fp.segments[index].path if index < len(fp.segments) else old.segments[index].path
            )
            offset = excerpt = None
            if previous.has_text and snap.has_text:
                divergence = first_divergence(old, fp)
                if divergence is not None:
                    # positions and excerpts in the text the user wrote (the string at the
                    # path), not in the segment's canonical JSON
                    segment, offset = divergence.path, divergence.field_offset
                    if with_excerpt:
                        if divergence.text_before is not None:
                            excerpt = _excerpt(divergence.text_before, divergence.text_after or "")
                        else:
                            excerpt = _excerpt(divergence.before, divergence.after)
            reason = classify_change(old, fp, index)
            if (
                reason == "messages_changed"
                and previous.has_text
                and snap.has_text
                and single_block_edit(old.segments[index].text, fp.segments[index].text)
            ):
                reason = "anchor_changed"
            return BreakExplanation(reason, segment, offset, excerpt, prev_id, False, gap)
        ttl = previous.ttl_s
        # past the TTL, but the vendor read the cache (a vendor that kept it longer, or another
        # request that refreshed it): not expired
        if ttl is not None and gap is not None and gap > ttl and not read:
            return BreakExplanation("ttl_expired", previous_request_id=prev_id, gap_s=gap)
        carries_cache = index is None or index > previous.cached_extent
        if carries_cache and snap.has_text and lookback_applies(fp.api, fp.model):
            found = check_lookback(old, fp)
            if found is not None:
                verdict, write_path = found
                return BreakExplanation(
                    verdict.reason,
                    verdict.path,
                    None,
                    verdict.describe(write_path),
                    prev_id,
                    False,
                    gap,
                )
        expected = previous.cached_extent >= 0 and previous.ready_at <= snap.started_at
        if expected and index == 0:  # its lone message is new: only the text it kept is read,
            # where the upstream caches every prefix by itself (a breakpoint caches whole blocks)
            expected = fp.api not in EXPLICIT_BREAKPOINT_APIS and _kept_text_tokens(
                previous, snap
            ) >= (minimum or ENGINE_MIN_TOKENS)
        return BreakExplanation(None, previous_request_id=prev_id, expected_hit=expected, gap_s=gap)

    def _minimum_tokens(self, model: str | None, vendor: str | None) -> int | None:
        """The minimum cacheable prefix in tokens: the engine's :data:`ENGINE_MIN_TOKENS`, else
        the model's table row; for another self-hosted upstream, the row if the model has one,
        else :data:`ENGINE_MIN_TOKENS`; None when unknown."""
        if vendor == "engine":
            return ENGINE_MIN_TOKENS
        if model is None:
            minimum = None
        elif model in self._min_tokens:
            minimum = self._min_tokens[model]
        else:
            row = self.minimums.lookup(model)
            minimum = row.min_tokens if row is not None else None
            if len(self._min_tokens) >= MAX_MINIMUM_CACHE:
                self._min_tokens.clear()
            self._min_tokens[model] = minimum
        if minimum is None and vendor in SELF_HOSTED_VENDORS:
            return ENGINE_MIN_TOKENS
        return minimum

    def __call__(self, record: RequestRecord) -> None:
        """Record hook: fill ``record``'s break columns. Logs and swallows any error."""
        try:
            self._fill(record)
        except Exception:  # a hook must never break forwarding or logging
            logger.exception("cache-break explainer failed for request %s", record.id)

    def _fill(self, record: RequestRecord) -> None:
        fp = record.fingerprint
        key_for_routing = routing_key(record.request_json)
        # unless a predecessor is found
        record.prefix_family = (
            family_id(record.first_segment_hash, key_for_routing)
            if record.first_segment_hash is not None
            else None
        )
        if fp is None or record.status is None or not 200 <= record.status < 300:
            return
        if counts_tokens_only(record.route):
            return
        write = None
        if record.total_input_tokens is not None:
            write = (
                (record.cache_write_5m_tokens or 0)
                + (record.cache_write_1h_tokens or 0)
                + (record.cache_write_unknown_tokens or 0)
            )
        snap = PrefixSnapshot(
            request_id=record.id,
            started_at=record.started_at,
            ready_at=record.first_byte_at or record.ended_at or record.started_at,
            vendor=record.vendor,
            key_fingerprint=record.key_fingerprint,
            fingerprint=fp,
            has_text=True,
            routing_key=key_for_routing,
            cached_tokens=cached_tokens_of(
                record.api,
                record.breakpoints,
                record.total_input_tokens,
                record.cache_read_tokens,
                write,
            ),
        )
        result = self.explain(
            snap,
            cache_read_tokens=record.cache_read_tokens,
            cache_write_tokens=write,
            with_excerpt=record.request_body is not None,
            prompt_tokens=record.total_input_tokens,
        )
        record.break_reason = result.reason
        record.break_segment = result.segment
        record.break_offset = result.offset
        record.break_excerpt = result.excerpt
        record.previous_request_id = result.previous_request_id
        record.break_tokens_lost = result.tokens_lost
        record.prefix_family = result.prefix_family
        record.expected_hit = int(result.expected_hit)
        record.unexpected_miss = int(
            result.expected_hit
            and record.cache_read_tokens is not None
            and record.cache_read_tokens == 0
        )

    # ------------------------------------------------------------------------------ rebuilding
    def load(self, db_path: str | Path, *, since: float) -> int:
        """Rebuild the per-family state from the log: the latest :data:`SNAPSHOTS_PER_FAMILY`
        successful requests per family started at or after ``since`` (unix s), at most
        ``max_families`` x that many rows, newest first. Returns how many families it holds.

        Segment texts, ``prompt_cache_key`` and ``cache_salt`` come from the stored body when
        there is one (``--store-bodies``) and its hashes match; otherwise the snapshot has hashes
        only and no routing key (the first request of such a session after a restart is a
        ``new_prefix``).
        ``db_path`` is a SQLite file or a ``postgresql://`` URL (every proxy's rows, on a log
        several proxies share).

        Raises:
            StoreError: the log cannot be read (:func:`read_log`).
        """
        rows = read_log(
            db_path,
            """
                SELECT id, started_at, COALESCE(first_byte_at, ended_at, started_at), vendor, api,
                       model, key_fingerprint, segment_hashes, breakpoints, approx_prefix_tokens,
                       request_body, total_input_tokens, cache_read_tokens,
                       COALESCE(cache_write_5m_tokens, 0) + COALESCE(cache_write_1h_tokens, 0)
                         + COALESCE(cache_write_unknown_tokens, 0),
                       COALESCE(prefix_family, first_segment_hash)
                FROM (SELECT *, ROW_NUMBER() OVER (
                        PARTITION BY key_fingerprint, model, first_segment_hash
                        ORDER BY started_at DESC) AS rn
                      FROM requests
                      WHERE started_at >= ? AND first_segment_hash IS NOT NULL
                        AND status >= 200 AND status < 300 AND segment_hashes IS NOT NULL
                        AND COALESCE(route, '') NOT LIKE '%/count_tokens'
                        AND COALESCE(route, '') NOT LIKE '%:countTokens')
                WHERE rn <= ? ORDER BY started_at DESC LIMIT ?
                """,
            (since, SNAPSHOTS_PER_FAMILY, self.max_families * SNAPSHOTS_PER_FAMILY),
        )
        for row in reversed(rows):
            snap = _snapshot_from_row(row)
            if snap is not None:
                self.remember(snap)
        return len(self._families)


def _snapshot_from_row(row: tuple[Any, ...]) -> PrefixSnapshot | None:
    (rid, started, ready, vendor, api, model, key, seg_json, bp_json, tokens, body) = row[:11]
    total_input, read, writes, family = row[11:15]
    try:
        stored = json.loads(seg_json)
        texts: dict[str, str] = {}
        key_for_routing = None
        if body:
            request = json.loads(body)
            key_for_routing = routing_key(request)
            parsed = fingerprint_request(request, api or "auto")
            texts = {s.sha256: s.text for s in parsed.segments}
        segments = [
            Segment(
                s["path"], s["kind"], s["sha256"], int(s["num_chars"]), texts.get(s["sha256"], "")
            )
            for s in stored
        ]
        paths = [s.path for s in segments]
        breakpoints = [_breakpoint(bp, paths) for bp in json.loads(bp_json or "[]")]
    except (ValueError, KeyError, TypeError, PromptCacheError) as exc:  # skip one bad row
        logger.warning("skipping request %s while rebuilding break state: %s", rid, exc)
        return None
    fp = RequestFingerprint(
        api=api or "",
        model=model,
        segments=segments,
        chained=[],
        prefix_hash="",
        breakpoints=breakpoints,
        approx_prefix_tokens=int(tokens or 0),
    )
    has_text = bool(segments) and all(s["sha256"] in texts for s in stored)
    cached = cached_tokens_of(api, bp_json, total_input, read, writes)
    return PrefixSnapshot(
        rid,
        started,
        ready,
        vendor,
        key,
        fp,
        has_text,
        key_for_routing,
        cached_tokens=cached,
        prefix_family=family,
    )


def _breakpoint(data: dict[str, Any], paths: list[str]) -> Breakpoint:
    """A stored breakpoint; its segment index is recomputed from its path when not stored."""
    if "segment_index" in data:
        return Breakpoint(data["path"], data.get("ttl"), int(data["segment_index"]))
    path = data["path"]
    index = len(paths) - 1 if path == "cache_control" else -1
    for i, seg_path in enumerate(paths):
        if path == seg_path or path.startswith((seg_path + ".", seg_path + "[")):
            index = i
    return Breakpoint(path, data.get("ttl"), index)


def log_exists(location: str | Path | None) -> bool:
    """Whether ``location`` (``app.state.store.path``) names a log to read back: a
    ``postgresql://`` URL, or a SQLite file that exists."""
    if location is None:
        return False
    return is_postgres_url(str(location)) or Path(location).is_file()


def read_log(location: str | Path, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The rows of one SQLite-dialect query with ``?`` parameters over the request log, read
    only: a SQLite file (``mode=ro``) or a ``postgresql://`` URL (a read-only transaction, the
    SQL translated by :func:`.dialect.to_postgres`).

    Raises:
        StoreError: the log cannot be opened or the query fails (one line, password masked).
    """
    if is_postgres_url(str(location)):
        from .store_postgres import PgConnection

        with PgConnection(str(location), read_only=True) as conn:
            return [tuple(row) for row in conn.execute(sql, params).fetchall()]
    try:
        conn_lite = sqlite3.connect(f"{Path(location).resolve().as_uri()}?mode=ro", uri=True)
        try:
            return conn_lite.execute(sql, params).fetchall()
        finally:
            conn_lite.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the request log {location}: {exc}") from exc


#: How far back :func:`install` rebuilds state from the log (longest TTL we know, plus margin).
REBUILD_WINDOW_S: Final = 2 * 3600.0


def install(app: Starlette, *, clock: Callable[[], float] | None = None) -> BreakExplainer:
    """Run a :class:`BreakExplainer` first among ``app.state.record_hooks`` (before metrics).

    Rebuilds its state from ``app.state.store.path`` when the app has a log (a SQLite file, or a
    ``postgresql://`` URL: then from the whole fleet's rows of the last
    :data:`REBUILD_WINDOW_S`); a log that cannot be read is logged and the state starts empty.
    Keeps the instance on ``app.state.breaks``.
    """
    explainer = BreakExplainer()
    store = getattr(app.state, "store", None)
    path = getattr(store, "path", None)
    if path is not None and log_exists(path):
        now = (clock or time.time)()
        try:
            explainer.load(path, since=now - REBUILD_WINDOW_S)
        except StoreError as exc:
            logger.warning("break explainer: starting with no history: %s", exc)
    hooks = getattr(app.state, "record_hooks", None)
    if hooks is None:
        hooks = []
        app.state.record_hooks = hooks
    hooks.insert(0, explainer)
    app.state.breaks = explainer
    return explainer
