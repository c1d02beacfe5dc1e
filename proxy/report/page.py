"""The HTML report's page data: every number the page draws, computed here (the page only draws).

:func:`build_page` takes a :class:`~.report.Report` (totals, break reasons, TTFT percentiles,
recommendations) and reads the finer figures from the same log over the same window with
:mod:`.report.page_sql`:

- :class:`Headline`: saved (net savings and its share of the cost without cache), left on the
  table (dollars lost to breaks, :class:`~.report.BreakReasonSummary.usd_lost` summed), and
  what to change first: the report's first recommendation, so the page, its list of
  recommendations and ``promptcache report`` say the same;
- :class:`BreakStrip`: one real request's prompt as its segments in order, each with its share
  of the request's tokens, its cache breakpoints, and how many breaks in the window first
  diverged inside it (and at which character, most often);
- :class:`DivergenceDiff`: the 3 commonest first divergences with a stored excerpt, as
  before/after character runs (``same`` / ``removed`` / ``added``, from :mod:`difflib`);
- :class:`FamilyRow`: the prefix families, costliest first (among the
  :data:`FAMILY_CANDIDATES` with the most input tokens);
- :class:`PageTimeline`: the report's own timeline (``Report.timeline``, buckets sized from the
  span of traffic in the window by :func:`pick_bucket_s`, as ``--format json`` has them) with
  its empty buckets filled in, and breaks per reason per bucket;
- :class:`TtftHistogram`: TTFT of hits and misses as two histograms on shared bins.

Everything is keyed by data, never by a fixed list: reasons come from the log, segments from
the request, so new break reasons and report sections need no change here.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Final, Literal

from promptcache.demo.summary import value_kind, word_start
from promptcache.errors import StoreError

from . import BUCKET_LADDER_S, MAX_BUCKETS, Report, connect_log, pick_bucket_s
from . import page_sql as q
from .advice import Recommendation
from .merge import merged_log

__all__ = [
    "BUCKET_LADDER_S",
    "FAMILY_CANDIDATES",
    "MAX_BUCKETS",
    "MAX_FAMILIES",
    "MIN_SAME_CHARS",
    "MIN_TTFT_COMPARE",
    "BreakStrip",
    "DiffRun",
    "DivergenceDiff",
    "FamilyRow",
    "Headline",
    "Page",
    "PageBucket",
    "PageTimeline",
    "StripSegment",
    "TtftHistogram",
    "build_page",
    "diff_runs",
    "pick_bucket_s",
]

#: Families listed in the table (the costliest); the rest are counted.
MAX_FAMILIES: Final = 10
#: The families with the most input tokens (from the hourly rollup) among which the costliest
#: are picked: costing every family of a busy week means reading every row.
FAMILY_CANDIDATES: Final = 50
#: Divergences shown as before/after diffs.
MAX_DIFFS: Final = 3
#: Shorter matches between two changes are drawn as part of the change (:func:`diff_runs`).
MIN_SAME_CHARS: Final = 3
#: Requests each side needs before the TTFT caption compares hits with misses.
MIN_TTFT_COMPARE: Final = 5


@dataclass(frozen=True)
class Headline:
    """The three answers at the top of the page (USD, fractions in [0, 1]).

    Attributes:
        saved_usd: net savings (cost without cache - cost; negative when writes went unread).
        saved_fraction: ``saved_usd / cost_without_cache_usd`` (None without priced traffic).
        left_usd, left_tokens: dollars and input tokens lost to cache breaks in the window
            (tokens as the upstream counted them in its usage).
        left_unpriced: whether every one of those breaks is of an unpriced model, so that the
            dollars lost are unknown, not ``left_usd``'s $0.
        change: what to change first: the report's first recommendation
            (:func:`.report.advice.recommend`, the list ``promptcache report`` prints), None
            when there is none.
    """

    saved_usd: float
    saved_fraction: float | None
    left_usd: float
    left_tokens: int
    change: Recommendation | None
    left_unpriced: bool = False


@dataclass(frozen=True)
class StripSegment:
    """One segment of the strip's request.

    Attributes:
        path, kind: as logged (``system[0]``, ``tools[2]``, ``messages[3]``; kind ``tools``,
            ``system`` or ``messages``).
        chars: its canonical text's length (characters).
        tokens: its ``cl100k_base`` tokens as the proxy logged them per segment (their sum is
            the request's ``approx_prefix_tokens``); None for a row logged before per-segment
            counts were kept (then the strip is drawn by characters).
        breakpoint_ttl: ``"5m"``/``"1h"`` when a cache breakpoint closes this segment, ``""``
            for a vendor-fixed TTL, else None.
        breaks: breaks in the window whose first change is inside this segment.
        offset: the character offset where most of them first differ (None if unknown).
        offset_breaks: how many breaks first differ at ``offset``.
    """

    path: str
    kind: str
    chars: int
    tokens: int | None
    breakpoint_ttl: str | None
    breaks: int
    offset: int | None
    offset_breaks: int


@dataclass(frozen=True)
class BreakStrip:
    """The prompt of ``request_id`` (the latest request of the costliest break reason, else the
    latest request) drawn as segments, with where the window's breaks first diverged.

    Each segment's width is proportional to its tokens when the log has every segment's count
    (:attr:`unit` ``"tokens"``), else to its characters (``"characters"``: rows logged before
    the proxy kept per-segment counts hold only the request's total).

    ``outside``: breaks whose segment this request does not have (a longer conversation);
    ``unplaced``: breaks with no segment (``ttl_expired``, ``model_changed``), per reason.
    """

    request_id: str
    reason: str | None
    segments: tuple[StripSegment, ...]
    outside: int
    unplaced: tuple[tuple[str, int], ...]
    #: the request's ``approx_prefix_tokens`` as logged (None if not logged); only for the
    #: widths: the page states one token count per request, :attr:`input_tokens`
    approx_tokens: int | None = None
    #: the request's input tokens as the upstream counted them (its usage's total input, the
    #: count every other figure on the page uses); None when the response had no usage
    input_tokens: int | None = None

    @property
    def unit(self) -> Literal["tokens", "characters"]:
        """What the widths are proportional to."""
        return "tokens" if all(s.tokens is not None for s in self.segments) else "characters"

    def size(self, segment: StripSegment) -> int:
        """``segment``'s size in :attr:`unit` (tokens or characters)."""
        return (segment.tokens or 0) if self.unit == "tokens" else segment.chars

    @property
    def total(self) -> int:
        """The request's size in :attr:`unit`: the sum of the segments' sizes."""
        return sum(self.size(s) for s in self.segments)

    def share(self, segment: StripSegment) -> float | None:
        """``segment``'s share of the request in [0, 1] (its width), None for an empty one."""
        return self.size(segment) / self.total if self.total else None


@dataclass(frozen=True)
class DiffRun:
    """A run of characters of one side of a diff: ``same``, ``removed`` (before only) or
    ``added`` (after only)."""

    kind: Literal["same", "removed", "added"]
    text: str


@dataclass(frozen=True)
class DivergenceDiff:
    """One first divergence shared by ``breaks`` requests, with the latest one's redacted
    excerpt (30 characters each side of ``offset``) as before/after runs. ``offset``: where the
    changed value starts in the text at ``segment`` (the user's text, from 0); ``kind``: what
    that value looks like (``a time``, ``an id``...; None when unrecognised)."""

    reason: str
    segment: str | None
    offset: int | None
    breaks: int
    request_id: str
    before: tuple[DiffRun, ...]
    after: tuple[DiffRun, ...]
    kind: str | None = None


@dataclass(frozen=True)
class FamilyRow:
    """One prefix family (same key, model, first segment): money USD, hit rate token-weighted."""

    label: str
    requests: int
    hit_rate: float | None
    cache_read_tokens: int
    cost_usd: float
    savings_usd: float
    top_reason: str | None
    top_reason_breaks: int


@dataclass(frozen=True)
class PageBucket:
    """One time bucket: start (unix s), requests, token-weighted hit rate (None without input),
    spend (USD) and breaks per reason."""

    start: float
    requests: int
    hit_rate: float | None
    cost_usd: float
    cost_without_cache_usd: float
    breaks: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PageTimeline:
    """Buckets of ``bucket_s`` seconds from the first to the last request in the window (empty
    buckets included, so x is linear in time); ``reasons``: break reasons, most breaks first."""

    bucket_s: float
    buckets: tuple[PageBucket, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class TtftHistogram:
    """TTFT counts of successful hits and misses on shared bins (``edges_ms``: n + 1 edges for
    n bins, the last open-ended); empty bins at both ends dropped."""

    edges_ms: tuple[float, ...]
    hit: tuple[int, ...]
    miss: tuple[int, ...]
    caption: str


@dataclass(frozen=True)
class Page:
    """Everything the HTML page draws beside the :class:`~.report.Report` itself."""

    report: Report
    headline: Headline
    strip: BreakStrip | None
    diffs: tuple[DivergenceDiff, ...]
    families: tuple[FamilyRow, ...]
    more_families: int
    timeline: PageTimeline
    ttft: TtftHistogram


def build_page(report: Report) -> Page:
    """Read the page's figures from ``report.db`` over ``[report.since, report.until)`` (from
    ``report.sources`` merged into one temporary log when the report is of several logs).

    Raises:
        ConfigError: ``report.db`` is not a proxy log (as :func:`~.report.build_report`).
        StoreError: the log cannot be read.
    """
    t0, t1 = report.since, report.until
    with ExitStack() as stack:
        # several logs: merged again into one temporary log, as build_report read them
        path = stack.enter_context(merged_log(report.sources)) if report.sources else report.db
        conn = connect_log(path)
        try:
            strip = _strip(conn, t0, t1, report)
            diffs = _diffs(conn, t0, t1)
            families, more = _families(conn, t0, t1)
            timeline = _timeline(conn, report)
            ttft = _ttft(conn, t0, t1, report)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the request log {report.db_shown}: {exc}") from exc
        finally:
            conn.close()
    return Page(report, _headline(report), strip, diffs, families, more, timeline, ttft)


def _headline(report: Report) -> Headline:
    total = report.total
    saved_fraction = (
        total.net_savings_usd / total.cost_without_cache_usd
        if total.cost_without_cache_usd
        else None
    )
    reasons = report.break_reasons
    return Headline(
        saved_usd=total.net_savings_usd,
        saved_fraction=saved_fraction,
        left_usd=sum(b.usd_lost for b in reasons),
        left_tokens=sum(b.tokens_lost for b in reasons),
        change=report.recommendations[0] if report.recommendations else None,
        left_unpriced=bool(reasons) and all(b.all_unpriced for b in reasons),
    )


def _segment_of(path: str, break_segment: str) -> bool:
    """Whether ``break_segment`` (``messages[0].content``) lies inside segment ``path``."""
    return break_segment == path or break_segment.startswith((path + ".", path + "["))


def _strip(conn: sqlite3.Connection, t0: float, t1: float, report: Report) -> BreakStrip | None:
    placed = [b for b in report.break_reasons if b.top_segment]
    reason = placed[0].reason if placed else None
    layout = q.latest_layout(conn, t0, t1, reason) if reason else None
    if layout is None:
        reason, layout = None, q.latest_layout(conn, t0, t1, None)
    if layout is None:
        return None
    segments = json.loads(layout.segments_json)
    if not segments:
        return None
    ttls: dict[int, str] = {}
    for bp in json.loads(layout.breakpoints_json or "[]"):
        path = str(bp.get("path", ""))
        matches = [i for i, s in enumerate(segments) if _segment_of(s["path"], path)]
        # a top-level marker (Anthropic's automatic caching) closes the whole prompt
        index = matches[0] if matches else len(segments) - 1
        ttls[index] = bp.get("ttl") or ""
    per_segment: dict[int, dict[int | None, int]] = {}
    outside = 0
    for row in q.segment_breaks(conn, t0, t1):
        hits = [i for i, s in enumerate(segments) if _segment_of(s["path"], row.segment)]
        if not hits:
            outside += row.breaks
            continue
        offsets = per_segment.setdefault(hits[0], {})
        offsets[row.offset] = offsets.get(row.offset, 0) + row.breaks
    out = []
    for i, s in enumerate(segments):
        offsets = per_segment.get(i, {})
        known = {k: v for k, v in offsets.items() if k is not None}
        offset, offset_breaks = max(
            known.items(), key=lambda kv: (kv[1], -kv[0]), default=(None, 0)
        )
        out.append(
            StripSegment(
                path=str(s["path"]),
                kind=str(s["kind"]),
                chars=int(s["num_chars"]),
                tokens=None if s.get("num_tokens") is None else int(s["num_tokens"]),
                breakpoint_ttl=ttls.get(i),
                breaks=sum(offsets.values()),
                offset=offset,
                offset_breaks=offset_breaks,
            )
        )
    unplaced = sorted(q.unplaced_breaks(conn, t0, t1).items(), key=lambda kv: (-kv[1], kv[0]))
    return BreakStrip(
        layout.request_id,
        reason,
        tuple(out),
        outside,
        tuple(unplaced),
        layout.approx_prefix_tokens,
        layout.total_input_tokens,
    )


def diff_runs(before: str, after: str) -> tuple[tuple[DiffRun, ...], tuple[DiffRun, ...]]:
    """Character-level diff of two strings as (before runs, after runs): ``same`` text on both,
    ``removed`` only before, ``added`` only after (:class:`difflib.SequenceMatcher`, no junk
    heuristic). A match shorter than :data:`MIN_SAME_CHARS` between two changes counts as
    changed (two random ids share the odd character by chance; ``9ab3`` -> ``7cd3`` is one
    change, not two). Joining a side's run texts gives that string back."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    blocks = [b for b in matcher.get_matching_blocks() if b.size]
    kept = [
        b
        for k, b in enumerate(blocks)
        if b.size >= MIN_SAME_CHARS
        or (k == 0 and b.a == 0 and b.b == 0)
        or (k == len(blocks) - 1 and b.a + b.size == len(before) and b.b + b.size == len(after))
    ]
    old: list[DiffRun] = []
    new: list[DiffRun] = []
    i = j = 0
    for block in [*kept, difflib.Match(len(before), len(after), 0)]:
        if block.a > i:
            old.append(DiffRun("removed", before[i : block.a]))
        if block.b > j:
            new.append(DiffRun("added", after[j : block.b]))
        if block.size:
            old.append(DiffRun("same", before[block.a : block.a + block.size]))
            new.append(DiffRun("same", after[block.b : block.b + block.size]))
        i, j = block.a + block.size, block.b + block.size
    return tuple(old), tuple(new)


def _split_excerpt(excerpt: str) -> tuple[str, str] | None:
    """The explainer's ``-before\\n+after`` as (before, after); canonical JSON text holds no raw
    newline, so the first ``\\n+`` is the separator."""
    if not excerpt.startswith("-") or "\n+" not in excerpt:
        return None
    before, after = excerpt[1:].split("\n+", 1)
    return before, after


def _diffs(conn: sqlite3.Connection, t0: float, t1: float) -> tuple[DivergenceDiff, ...]:
    groups: dict[tuple[str, str | None, int | None], list[q.DivergenceRow]] = {}
    for row in q.divergence_groups(conn, t0, t1):
        offset = word_start(row.offset, row.excerpt) if row.offset is not None else None
        groups.setdefault((row.reason, row.segment, offset), []).append(row)
    ranked = sorted(
        groups.items(), key=lambda kv: (-sum(r.breaks for r in kv[1]), kv[0][0], kv[0][1] or "")
    )
    out = []
    for (reason, segment, offset), rows in ranked:
        sides = _split_excerpt(rows[0].excerpt)
        if sides is None:
            continue
        before, after = diff_runs(*sides)
        breaks = sum(r.breaks for r in rows)
        kind = value_kind(rows[0].excerpt)
        request = rows[0].request_id
        out.append(DivergenceDiff(reason, segment, offset, breaks, request, before, after, kind))
        if len(out) == MAX_DIFFS:
            break
    return tuple(out)


def _label(key: str | None, model: str | None, first: str) -> str:
    return f"key {(key or '-')[:8]} / {model or '-'} / prefix {first[:8]}"


def _families(conn: sqlite3.Connection, t0: float, t1: float) -> tuple[tuple[FamilyRow, ...], int]:
    candidates, total = q.family_candidates(conn, t0, t1, FAMILY_CANDIDATES)
    rows = sorted(
        (q.family_cost(conn, t0, t1, family) for family in candidates),
        key=lambda r: (-r.cost_usd, -r.requests, r.first_segment_hash),
    )
    reasons = q.family_top_reasons(conn, t0, t1)
    out = []
    for r in rows[:MAX_FAMILIES]:
        family = (r.key_fingerprint, r.model, r.first_segment_hash)
        reason, n = reasons.get(family, (None, 0))
        out.append(
            FamilyRow(
                label=_label(*family),
                requests=r.requests,
                hit_rate=r.cache_read_tokens / r.total_input_tokens
                if r.total_input_tokens
                else None,
                cache_read_tokens=r.cache_read_tokens,
                cost_usd=r.cost_usd,
                savings_usd=r.cost_without_cache_usd - r.cost_usd,
                top_reason=reason,
                top_reason_breaks=n,
            )
        )
    return tuple(out), max(0, total - len(out))


def _timeline(conn: sqlite3.Connection, report: Report) -> PageTimeline:
    size, points = report.bucket_s, report.timeline
    if not points:
        return PageTimeline(size, (), ())
    origin = points[0].start  # the first request's bucket, aligned to a multiple of ``size``
    rows = {round((p.start - origin) / size): p for p in points}
    count = max(rows) + 1
    breaks: dict[int, dict[str, int]] = {}
    totals: dict[str, int] = {}
    for index, reason, n in q.bucket_breaks(conn, report.since, report.until, origin, size):
        breaks.setdefault(index, {})[reason] = n
        totals[reason] = totals.get(reason, 0) + n
    reasons = tuple(sorted(totals, key=lambda r: (-totals[r], r)))
    out = []
    for i in range(count):
        row = rows.get(i)
        per = breaks.get(i, {})
        out.append(
            PageBucket(
                start=origin + i * size,
                requests=row.requests if row else 0,
                hit_rate=row.hit_rate if row else None,
                cost_usd=row.cost_usd if row else 0.0,
                cost_without_cache_usd=row.cost_without_cache_usd if row else 0.0,
                breaks=tuple((r, per[r]) for r in reasons if r in per),
            )
        )
    return PageTimeline(size, tuple(out), reasons)


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:,.1f} ms"


def _ttft(conn: sqlite3.Connection, t0: float, t1: float, report: Report) -> TtftHistogram:
    counts = q.ttft_histogram(conn, t0, t1)
    used = [i for i in range(len(q.TTFT_EDGES_MS) - 1) if counts[True][i] or counts[False][i]]
    lo, hi = (used[0], used[-1] + 1) if used else (0, 0)
    by_class = {t.hit: t for t in report.ttft}
    hit, miss = by_class.get(True), by_class.get(False)
    parts = []
    for label, t in (("Cache hits", hit), ("Cache misses", miss)):
        if t is None:
            parts.append(f"{label}: none.")
        else:
            parts.append(
                f"{label}: {t.requests:,} request{'' if t.requests == 1 else 's'}, "
                f"median {_ms(t.p50_ms)}, p95 {_ms(t.p95_ms)}."
            )
    if hit is None or miss is None:
        parts.append("Nothing to compare.")
    elif min(hit.requests, miss.requests) < MIN_TTFT_COMPARE:
        fewer = "hits" if hit.requests < miss.requests else "misses"
        parts.append(f"Too few {fewer} (under {MIN_TTFT_COMPARE}) to say which starts sooner.")
    elif hit.p50_ms == miss.p50_ms:
        parts.append("The medians are equal.")
    else:
        sooner = "hits" if hit.p50_ms < miss.p50_ms else "misses"
        gap = abs(hit.p50_ms - miss.p50_ms)
        parts.append(f"The median of the {sooner} is {_ms(gap)} lower in this window.")
    return TtftHistogram(
        edges_ms=q.TTFT_EDGES_MS[lo : hi + 1],
        hit=tuple(counts[True][lo:hi]),
        miss=tuple(counts[False][lo:hi]),
        caption=" ".join(parts),
    )
