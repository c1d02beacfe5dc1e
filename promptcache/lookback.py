"""Anthropic's cache lookback window: block positions, breakpoint reach, sliding breakpoints.

The rule (https://platform.claude.com/docs/en/build-with-claude/prompt-caching , checked
2026-12-01; summarised in ``shared/reference/vendor-caching.md``): a cache *write* happens only
at a breakpoint, and a *read* looks back from each breakpoint over at most 20 block positions
for a prefix written earlier. A run of consecutive ``tool_use`` or ``tool_result`` blocks counts
as one position. So an agent turn that appends more than 20 positions after the previous
request's last breakpoint misses the cache although its prefix is byte-identical.

How promptcache counts positions (:func:`block_positions`), in prefix order tools -> system ->
messages: each tool definition, each system block (a string ``system`` is one block) and each
message content block is one position; a message whose ``content`` is a string is one block.
Consecutive blocks that are each a ``tool_use`` or a ``tool_result`` (Bedrock: ``toolUse`` /
``toolResult``), also across a message boundary, share one position. This is our reading of
"a run of consecutive tool_use or tool_result blocks"; the SDK slides a breakpoint in after
:data:`SLIDE_AFTER_POSITIONS` (15) positions, well inside 20, so a different count of a few
positions does not turn into a miss.

A breakpoint at position ``b`` reads an entry written at position ``w`` when
``0 <= b - w <= 20`` (:data:`ANTHROPIC_LOOKBACK`): "more than 20 positions after" the last write
misses.

Bedrock: the Converse API's ``cachePoint`` blocks are standalone markers that close the block
before them; they are not positions themselves. AWS documents the lookback for Claude models
only (its "simplified cache management": one ``cachePoint`` at the end, Bedrock checks about 20
preceding content blocks; https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html ,
checked 2026-12-01; the page we could read does not spell out tool runs, so the Anthropic count
is used). For Amazon Nova and other non-Claude models no lookback is documented:
:func:`lookback_applies` is False and nothing here is claimed about them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from promptcache.errors import BreakpointTTLOrderError, ConfigError, RequestShapeError
from promptcache.fingerprint import Breakpoint, RequestFingerprint, fingerprint_request
from promptcache.minimums import default_model_minimums

__all__ = [
    "ANTHROPIC_LOOKBACK",
    "SLIDE_AFTER_POSITIONS",
    "LookbackRule",
    "LookbackVerdict",
    "SlideNote",
    "SlidingWindow",
    "block_positions",
    "breakpoint_position",
    "check_lookback",
    "lookback_applies",
    "single_block_edit",
]


@dataclass(frozen=True)
class LookbackRule:
    """How far back a breakpoint reads, as dated vendor data (override by passing your own).

    Attributes:
        blocks: a breakpoint at position ``b`` reads a write at ``w`` when ``0 <= b - w <=
            blocks`` (block positions, see :func:`block_positions`).
        source_url: where the vendor states it.
        checked: ISO date the source was last read.
    """

    blocks: int
    source_url: str
    checked: str


ANTHROPIC_LOOKBACK: Final = LookbackRule(
    blocks=20,
    source_url="https://platform.claude.com/docs/en/build-with-claude/prompt-caching",
    checked="2026-12-01",
)
#: The SDK places a sliding breakpoint once the last breakpoint would lie more than this many
#: positions after the previous request's last write (margin below the 20 of the rule).
SLIDE_AFTER_POSITIONS: Final = 15

_TOOL_TYPES: Final = frozenset({"tool_use", "tool_result"})
_BEDROCK_TOOL_KEYS: Final = frozenset({"toolUse", "toolResult"})
_CONTENT_INDEX = re.compile(r"^(?:messages|system)\[\d+\]\.content\[(\d+)\]")


def lookback_applies(api: str, model: str | None) -> bool:
    """Whether the 20-position lookback is documented for this API and model: every Anthropic
    Messages request; Bedrock Converse only for Claude models (see the module docstring)."""
    if api == "anthropic":
        return True
    if api == "bedrock_converse" and model:
        lowered = model.lower()
        return "anthropic" in lowered or "claude" in lowered
    return False


def _known_without_lookback(api: str, model: str | None) -> bool:
    """Whether ``model`` is a Bedrock model that the bundled minimum table knows as another
    vendor's than Anthropic (Amazon Nova), for which AWS documents no lookback. A model id the
    table does not know (an application inference profile ARN) may name a Claude model: a
    sliding breakpoint there costs little, a missed one the whole conversation's prefix."""
    if api != "bedrock_converse" or not model or lookback_applies(api, model):
        return False
    row = default_model_minimums().lookup(model)
    return row is not None and row.vendor.lower() != "anthropic"


def _is_tool_block(block: Any, api: str) -> bool:
    if not isinstance(block, Mapping):
        return False
    if api == "bedrock_converse":
        return any(key in block for key in _BEDROCK_TOOL_KEYS)
    kind = block.get("type")  # a type that is not a string (a list, an object) is no tool's
    return type(kind) is str and kind in _TOOL_TYPES


def _segment_blocks(kind: str, value: Any, api: str) -> list[bool]:
    """One entry per block of a segment value: whether it is a tool_use/tool_result block."""
    if kind != "messages" or not isinstance(value, Mapping):
        return [False]
    content = value.get("content")
    if isinstance(content, list):
        return [_is_tool_block(block, api) for block in content]
    return [False]


#: Per-segment block flags by (segment hash, api): the frozen segments and the history repeat
#: from one request to the next, so a proxy parses each segment's JSON once (bounded; the oldest
#: entry goes first).
_FLAGS_BY_SHA: dict[tuple[str, str], tuple[bool, ...]] = {}
_FLAGS_CACHE_SIZE: Final = 8192
_FLAGS_LOCK = threading.Lock()


def _flags(sha: str, kind: str, text: str, api: str) -> tuple[bool, ...] | None:
    cached = _FLAGS_BY_SHA.get((sha, api))
    if cached is not None:
        return cached
    if kind != "messages":
        return (False,)  # a tool definition or a system block: one position
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    flags = tuple(_segment_blocks(kind, value, api))
    with _FLAGS_LOCK:
        if len(_FLAGS_BY_SHA) >= _FLAGS_CACHE_SIZE:
            del _FLAGS_BY_SHA[next(iter(_FLAGS_BY_SHA))]
        _FLAGS_BY_SHA[sha, api] = flags
    return flags


def block_positions(fp: RequestFingerprint) -> list[list[int]] | None:
    """The position of every block, per segment of ``fp`` (0-based, in prefix order).

    Returns:
        ``positions[i][j]`` = position of block ``j`` of segment ``i``; a tool run shares one
        position. None when a message segment's text is unknown (a fingerprint rebuilt
        without bodies) or not JSON: nothing can be said then. Each segment's blocks are
        parsed once per segment hash (a bounded memo), so repeated history costs a lookup.
    """
    out: list[list[int]] = []
    pos, prev_tool = -1, False
    for seg in fp.segments:
        flags = _flags(seg.sha256, seg.kind, seg.text, fp.api)
        if flags is None:
            return None
        mine = []
        for is_tool in flags:
            if not (is_tool and prev_tool):
                pos += 1
            prev_tool = is_tool
            mine.append(pos)
        out.append(mine)
    return out


def breakpoint_position(
    bp: Breakpoint, siblings: Sequence[Breakpoint], positions: list[list[int]], api: str
) -> int | None:
    """Position of the block a breakpoint closes, or None when it cannot be placed.

    Args:
        bp: a breakpoint of the request ``siblings`` come from.
        siblings: all breakpoints of that request (Bedrock ``cachePoint`` blocks inside one
            message shift the indices of the blocks after them).
        positions: :func:`block_positions` of the request whose numbering is wanted (the same
            request, or a later one that carries ``bp``'s segment unchanged).
        api: the API of the request ``bp`` comes from.
    """
    i = bp.segment_index
    if i < 0 or i >= len(positions) or not positions[i]:
        return None
    match = _CONTENT_INDEX.match(bp.path)
    if match is None:
        return positions[i][-1]
    k = int(match[1])
    if api == "bedrock_converse":  # the cachePoint closes the block before it
        earlier = 0
        for other in siblings:
            m = _CONTENT_INDEX.match(other.path)
            if other.segment_index == i and m is not None and int(m[1]) < k:
                earlier += 1
        k = k - 1 - earlier
    if 0 <= k < len(positions[i]):
        return positions[i][k]
    return positions[i][-1]


@dataclass(frozen=True)
class LookbackVerdict:
    """Why a request reads less of its predecessor's cache than its prefix allows.

    Attributes:
        reason: ``"lookback_exceeded"`` (no breakpoint within ``rule.blocks`` positions after
            the predecessor's last write) or ``"breakpoint_moved"`` (every breakpoint lies
            before that write).
        last_write: position of the predecessor's last breakpoint.
        nearest: position of the request's breakpoint nearest after it (lookback_exceeded), or
            of its last breakpoint (breakpoint_moved).
        path: that breakpoint's path in the request.
        rule: the rule applied.
    """

    reason: Literal["lookback_exceeded", "breakpoint_moved"]
    last_write: int
    nearest: int
    path: str
    rule: LookbackRule = ANTHROPIC_LOOKBACK

    @property
    def distance(self) -> int:
        """Positions between the last write and ``nearest`` (positive either way)."""
        return abs(self.nearest - self.last_write)

    def describe(self, write_path: str) -> str:
        """One sentence with the numbers and the fix; ``write_path`` is the predecessor's last
        breakpoint. Contains no prompt text."""
        if self.reason == "lookback_exceeded":
            return (
                f"{self.distance} block positions appended after the previous request's last "
                f"cache write at {write_path}; the nearest breakpoint ({self.path}) looks back "
                f"at most {self.rule.blocks}: add a breakpoint within {self.rule.blocks} "
                "positions of the last write (a sliding one on an earlier message)"
            )
        return (
            f"the last breakpoint ({self.path}) moved {self.distance} block positions earlier "
            f"than the previous request's ({write_path}): the request reads less than it could; "
            "keep a breakpoint at or after the previous one"
        )


def check_lookback(
    old: RequestFingerprint,
    new: RequestFingerprint,
    rule: LookbackRule = ANTHROPIC_LOOKBACK,
) -> tuple[LookbackVerdict, str] | None:
    """Compare a request with its predecessor, whose cached prefix it carries unchanged.

    Args:
        old: the predecessor (only its breakpoints are read).
        new: the request; its segment texts must be known.
        rule: the lookback rule.

    Returns:
        ``(verdict, predecessor's last breakpoint path)``, or None when every write of ``old``
        stays readable (or when positions cannot be counted: silent when unsure). The caller
        checks that ``new`` repeats ``old``'s cached segments and that the API/model follow the
        rule (:func:`lookback_applies`).
    """
    positions = block_positions(new)
    if positions is None or not old.breakpoints or not new.breakpoints:
        return None
    writes = [
        (p, bp)
        for bp in old.breakpoints
        if (p := breakpoint_position(bp, old.breakpoints, positions, old.api)) is not None
    ]
    marks = [
        (p, bp)
        for bp in new.breakpoints
        if (p := breakpoint_position(bp, new.breakpoints, positions, new.api)) is not None
    ]
    if not writes or not marks:
        return None
    w, write_bp = max(writes, key=lambda item: item[0])
    after = [(p, bp) for p, bp in marks if p >= w]
    if not after:
        last, bp = max(marks, key=lambda item: item[0])
        return LookbackVerdict("breakpoint_moved", w, last, bp.path, rule), write_bp.path
    nearest, bp = min(after, key=lambda item: item[0])
    if nearest - w > rule.blocks:
        return LookbackVerdict("lookback_exceeded", w, nearest, bp.path, rule), write_bp.path
    return None


def single_block_edit(old_text: str, new_text: str) -> bool:
    """Whether two message segments (canonical JSON) differ by exactly one content block
    inserted or removed, everything else equal: the synthetic-anchor shape (a whitespace block
    that appears and disappears, VS Code issue #323642)."""
    try:
        old, new = json.loads(old_text), json.loads(new_text)
    except ValueError:
        return False
    if not isinstance(old, dict) or not isinstance(new, dict):
        return False
    a, b = old.get("content"), new.get("content")
    if not isinstance(a, list) or not isinstance(b, list) or abs(len(a) - len(b)) != 1:
        return False
    if {k: v for k, v in old.items() if k != "content"} != {
        k: v for k, v in new.items() if k != "content"
    }:
        return False
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    k = next((i for i, (x, y) in enumerate(zip(short, long_, strict=False)) if x != y), len(short))
    return long_[:k] + long_[k + 1 :] == short


@dataclass(frozen=True)
class SlideNote:
    """What :class:`SlidingWindow` did to one request.

    Attributes:
        path: the block marked (``messages[7].content[1]``), or None when nothing was added.
        message_index: index of its message.
        why: one sentence with the positions.
        dropped: path of a breakpoint removed to stay within 4, or None.
    """

    path: str | None
    message_index: int | None
    why: str
    dropped: str | None = None


MAX_BREAKPOINTS: Final = 4


class SlidingWindow:
    """Keeps consecutive requests of one conversation within the lookback window.

    Stateful: it remembers where the previous request (the last one passed to :meth:`apply`)
    wrote its last breakpoint. When the new request's last breakpoint lies more than
    ``slide_after`` positions beyond it, a *sliding* breakpoint is added on the latest message
    block at most ``slide_after`` positions after that write: that breakpoint reads the previous
    write, and the request's own last breakpoint writes the rest for the next request. At most 4
    breakpoints stay: if a fifth would be needed, the tools breakpoint goes first (the frozen
    system breakpoint's prefix contains the tools), then the earliest message breakpoint
    before the slide; frozen and session (system) breakpoints are kept. A Bedrock request whose
    ``modelId`` the bundled minimum table knows as a model of another vendor than Anthropic
    (Amazon Nova) never gets a sliding breakpoint under the default rule: AWS documents the
    lookback for Claude models only (:func:`lookback_applies`).

    Every request passed to :meth:`apply` is taken as sent. Use one instance per conversation.
    The marks it places in one request are taken off again when the next request holds the same
    block objects (an agent loop that appends to one message list), before it marks the new
    one; markers of the caller's own are left alone.

    Args:
        slide_after: positions after which to slide (default :data:`SLIDE_AFTER_POSITIONS`).
        rule: the lookback rule (default :data:`ANTHROPIC_LOOKBACK`).

    Raises:
        ValueError: ``slide_after`` is not in ``1..rule.blocks``.
    """

    def __init__(
        self, *, slide_after: int = SLIDE_AFTER_POSITIONS, rule: LookbackRule = ANTHROPIC_LOOKBACK
    ) -> None:
        if not 1 <= slide_after <= rule.blocks:
            raise ValueError(f"slide_after must be in 1..{rule.blocks}, got {slide_after!r}")
        self.slide_after = slide_after
        self.rule = rule
        # (chained prefix hash through the segment of the last write, its position)
        self._last: tuple[int, str, int] | None = None
        # the blocks apply() marked in the previous request (the marked text block, or the
        # inserted cachePoint block), taken off again if the next request holds them
        self._placed: list[dict[str, Any]] = []

    def reset(self) -> None:
        """Forget the previous request (a new conversation)."""
        self._last = None
        self._placed = []

    def apply(
        self,
        params: dict[str, Any],
        api: Literal["anthropic", "bedrock_converse"],
        *,
        tail: bool = False,
        ttl: Literal["5m", "1h"] | None = None,
    ) -> SlideNote:
        """Add a sliding breakpoint to ``params`` (in place) when needed; remember the request.

        Args:
            params: Anthropic Messages or Bedrock Converse parameters with their breakpoints.
            api: ``"anthropic"`` or ``"bedrock_converse"``.
            tail: also mark the last block of the last message (the usual agent-loop
                breakpoint, so the next request reads this one) unless it is marked already,
                or the request holds 4 breakpoints already (then ``why`` says so).
            ttl: the sliding breakpoint's TTL; None: that of the request's last breakpoint (so
                TTLs never increase along the prefix, which the API would reject with a 400).

        Returns:
            A :class:`SlideNote` (``path`` None when no breakpoint was added).

        Raises:
            RequestShapeError: ``params`` is not a request of ``api``.
            ConfigError: ``api`` is another API (its requests carry no breakpoints to slide),
                or ``ttl`` is not ``"5m"``, ``"1h"`` or None.
            BreakpointTTLOrderError: a slide is due and ``ttl`` would put it out of TTL order
                (``"1h"`` after a 5m breakpoint, ``"5m"`` before a 1h one); no slide is placed
                (the tail mark, if any, stays).
        """
        if api not in ("anthropic", "bedrock_converse"):
            raise ConfigError(
                f"SlidingWindow.apply(api={api!r}): the 20-block lookback and its breakpoints "
                "are Anthropic's and Bedrock's; use 'anthropic' or 'bedrock_converse' (OpenAI "
                "and Gemini cache automatically, with no breakpoint to place)"
            )
        if ttl is not None and ttl not in ("5m", "1h"):
            raise ConfigError(f"SlidingWindow.apply(ttl=...): use '5m', '1h' or None, got {ttl!r}")
        if not isinstance(params, dict):
            raise RequestShapeError(
                "SlidingWindow.apply() needs the request parameters as a dict (marked in "
                f"place), got {type(params).__name__}"
            )
        placed = self._placed
        self._placed = []
        # An agent loop passes the same message objects again, each turn longer: the marks this
        # window put on the previous request are still on them. Take them off, so the marks do
        # not pile up past the 4 the API accepts; the new tail (or a slide) reads that write.
        _unplace(params, placed)
        note = SlideNote(None, None, "")
        if tail and len(fingerprint_request(params, api).breakpoints) >= MAX_BREAKPOINTS:
            # a fifth breakpoint is a 400 from the API; the caller's own markers stay
            note = SlideNote(
                None,
                None,
                f"no tail breakpoint: the request holds {MAX_BREAKPOINTS} breakpoints already, "
                "the most the API accepts",
            )
        elif tail and (path := _mark_tail(params, api)) is not None:
            self._placed.append(_block_at(params, path))
        fp = fingerprint_request(params, api)
        positions = block_positions(fp)
        if positions is None:
            return note
        if self.rule is ANTHROPIC_LOOKBACK and _known_without_lookback(api, fp.model):
            # AWS documents the lookback for Claude models only: nothing to slide for (Nova)
            self._last = None
            return note
        last = self._last
        self._last = None
        marks = [
            p
            for bp in fp.breakpoints
            if (p := breakpoint_position(bp, fp.breakpoints, positions, api)) is not None
        ]
        if (
            last is not None
            and marks
            and last[0] < len(fp.chained)
            and fp.chained[last[0]] == last[1]
            and max(marks) - last[2] > self.slide_after
            and not any(last[2] <= p <= last[2] + self.slide_after for p in marks)
        ):
            try:
                slid = self._slide(params, api, fp, positions, last[2], max(marks), ttl)
            except BreakpointTTLOrderError:
                self._last = last  # nothing slid: a retry with another ttl slides from there
                raise
            note = slid if slid.path is not None or not note.why else note
            if note.path is not None:
                self._placed.append(_block_at(params, note.path))
                fp = fingerprint_request(params, api)
                positions = block_positions(fp) or positions
        self._remember(fp, positions, api)
        return note

    def _remember(self, fp: RequestFingerprint, positions: list[list[int]], api: str) -> None:
        best: tuple[int, int] | None = None
        for bp in fp.breakpoints:
            p = breakpoint_position(bp, fp.breakpoints, positions, api)
            if p is not None and (best is None or p > best[0]):
                best = (p, bp.segment_index)
        if best is not None:
            self._last = (best[1], fp.chained[best[1]], best[0])

    def _slide(
        self,
        params: dict[str, Any],
        api: str,
        fp: RequestFingerprint,
        positions: list[list[int]],
        write: int,
        tail: int,
        ttl: str | None,
    ) -> SlideNote:
        messages = params.get("messages")
        if not isinstance(messages, list):
            return SlideNote(None, None, "")
        first_message = next((i for i, s in enumerate(fp.segments) if s.kind == "messages"), 0)
        target: tuple[int, int] | None = None  # (message index, block index)
        for seg_index in range(first_message, len(fp.segments)):
            for j, p in enumerate(positions[seg_index]):
                m = seg_index - first_message
                if write <= p <= write + self.slide_after and _markable(messages, api, m, j):
                    target = (m, j)
        if target is None:
            return SlideNote(None, None, "")
        m, j = target
        dropped = None
        if len(fp.breakpoints) >= MAX_BREAKPOINTS:
            dropped = _drop_one(params, api, fp, m)
            if dropped is None:
                return SlideNote(
                    None,
                    None,
                    f"no sliding breakpoint: the request holds {MAX_BREAKPOINTS} breakpoints "
                    "already, the most the API accepts, and none may give way to one on "
                    f"messages[{m}] (only a tools breakpoint or one on an earlier message does; "
                    f"system breakpoints are kept): its newest breakpoint is {tail - write} block "
                    "positions after the previous request's last write, and a breakpoint reads "
                    f"at most {self.rule.blocks} back",
                )
        if ttl is None:
            ttl = max(
                fp.breakpoints,
                key=lambda bp: breakpoint_position(bp, fp.breakpoints, positions, api) or -1,
            ).ttl
        else:
            _check_slide_ttl(fp, positions, api, positions[first_message + m][j], ttl)
        path = _mark_block(params, api, m, j, ttl or "5m")
        first_message = next((i for i, s in enumerate(fp.segments) if s.kind == "messages"), 0)
        reach = positions[first_message + m][j] - write
        why = (
            f"sliding breakpoint: the last breakpoint is {tail - write} block positions after "
            f"the previous request's last write (position {write}) and a breakpoint reads at "
            f"most {self.rule.blocks} positions back ({self.rule.source_url}, checked "
            f"{self.rule.checked}); this one, {reach} positions after that write, reads it"
        )
        return SlideNote(path, m, why, dropped)


def _check_slide_ttl(
    fp: RequestFingerprint, positions: list[list[int]], api: str, at: int, ttl: str
) -> None:
    """Refuse a sliding breakpoint whose TTL the request's other breakpoints put out of order:
    a 1h one after a 5m one, or a 5m one before a 1h one (the API answers 400)."""
    for bp in fp.breakpoints:
        p = breakpoint_position(bp, fp.breakpoints, positions, api)
        if p is None or bp.ttl not in ("5m", "1h") or bp.ttl == ttl:
            continue
        if (p < at and bp.ttl == "5m") or (p > at and bp.ttl == "1h"):
            order = "after" if p < at else "before"
            raise BreakpointTTLOrderError(
                f"SlidingWindow.apply(ttl={ttl!r}): the sliding breakpoint would come {order} "
                f"{bp.path} with ttl {bp.ttl!r}; longer TTLs must come first in the prefix (the "
                "API answers 400): pass ttl=None (the TTL of the request's last breakpoint) or "
                f"{bp.ttl!r}"
            )


def _mark_block(params: dict[str, Any], api: str, m: int, j: int, ttl: str = "5m") -> str:
    message = params["messages"][m]
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
        message["content"] = content
    if api == "bedrock_converse":
        kept = [i for i, block in enumerate(content) if not _is_cache_point(block)]
        at = kept[j] + 1
        spec = {"type": "default"} if ttl == "5m" else {"type": "default", "ttl": ttl}
        content.insert(at, {"cachePoint": spec})
        return f"messages[{m}].content[{at}]"
    marker = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    content[j] = {**content[j], "cache_control": marker}
    return f"messages[{m}].content[{j}]"


#: Blocks that cannot carry a breakpoint (Anthropic: thinking blocks are not cached directly;
#: Bedrock: reasoning content), https://platform.claude.com/docs/en/build-with-claude/prompt-caching
#: (checked 2026-12-01).
_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})


def _markable(messages: list[Any], api: str, m: int, j: int) -> bool:
    """Whether block ``j`` (cache markers not counted) of message ``m`` may carry a breakpoint."""
    if m >= len(messages) or not isinstance(messages[m], Mapping):
        return False
    content = messages[m].get("content")
    if isinstance(content, str):
        return j == 0
    if not isinstance(content, list):
        return False
    blocks = [b for b in content if not _is_cache_point(b)]
    if j >= len(blocks) or not isinstance(blocks[j], Mapping):
        return False
    if api == "bedrock_converse":
        return "reasoningContent" not in blocks[j]
    kind = blocks[j].get("type")
    return not (type(kind) is str and kind in _UNMARKABLE)


def _mark_tail(params: dict[str, Any], api: str) -> str | None:
    """Mark the last block of the last message; its path, or None when nothing was marked
    (no message, or the block carries a marker already)."""
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    content = messages[-1].get("content")
    if isinstance(content, list) and content:
        last = content[-1]
        if _is_cache_point(last) or (isinstance(last, Mapping) and "cache_control" in last):
            return None
        kept = [i for i, block in enumerate(content) if not _is_cache_point(block)]
        return _mark_block(params, api, len(messages) - 1, len(kept) - 1)
    if isinstance(content, str):
        return _mark_block(params, api, len(messages) - 1, 0)
    return None


def _block_at(params: dict[str, Any], path: str) -> dict[str, Any]:
    """The block at ``messages[m].content[j]`` (a path ``_mark_block`` returned)."""
    m, j = (int(n) for n in re.findall(r"\[(\d+)\]", path))
    block: dict[str, Any] = params["messages"][m]["content"][j]
    return block


def _unplace(params: dict[str, Any], placed: list[dict[str, Any]]) -> None:
    """Take the markers of ``placed`` (blocks a window marked, found by identity) off the
    messages of ``params``: an inserted cachePoint block is removed, a text block loses its
    ``cache_control``."""
    if not placed:
        return
    ours = {id(block) for block in placed}
    messages = params.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for i in range(len(content) - 1, -1, -1):
            block = content[i]
            if id(block) not in ours:
                continue
            if _is_cache_point(block):
                del content[i]
            else:
                block.pop("cache_control", None)


def _is_cache_point(block: Any) -> bool:
    return isinstance(block, Mapping) and "cachePoint" in block and len(block) == 1


def _drop_one(params: dict[str, Any], api: str, fp: RequestFingerprint, before: int) -> str | None:
    """Remove the tools breakpoint, else the earliest message breakpoint before message
    ``before``; return its path (None when only system breakpoints are there to remove)."""
    tools = [bp for bp in fp.breakpoints if fp.segments[bp.segment_index].kind == "tools"]
    first_message = next((i for i, s in enumerate(fp.segments) if s.kind == "messages"), 0)
    early = [
        bp
        for bp in fp.breakpoints
        if fp.segments[bp.segment_index].kind == "messages"
        and bp.segment_index - first_message < before
    ]
    candidates = tools or early
    if not candidates:
        return None
    victim = candidates[0]
    _unmark(params, api, victim.path)
    return victim.path


def _unmark(params: dict[str, Any], api: str, path: str) -> None:
    """Remove the marker at ``path`` (``tools[2]``, ``toolConfig.tools[3]``,
    ``messages[4].content[1]``)."""
    parts = re.findall(r"([A-Za-z]+)|\[(\d+)\]", path)
    node: Any = params
    parent: Any = None
    key: Any = None
    for name, index in parts:
        parent, key = node, (name if name else int(index))
        node = node[key]
    if api == "bedrock_converse" and _is_cache_point(node):
        del parent[key]
    elif isinstance(node, dict):
        node.pop("cache_control", None)
