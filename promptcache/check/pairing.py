"""Pair the requests of two runs and find where their cacheable prefixes differ.

Pairing: request ``i`` of the baseline with request ``i`` of the other run, per call site, in
order. Requests whose prefixes are identical are paired first, then requests that are
identical once what the perturbations write is masked (dates, times, numbers of five digits or
more, uuids and hex ids), and a request still without a partner goes with the one of the other
run's next 16 that differs least (ties in order), so that workers finishing in another order
(a process or thread pool) do not pair unrelated requests.

Each pair is compared with the SDK's fingerprint core (``promptcache.fingerprint``: per-segment
hashes in the vendor's prefix order, ``first_divergence``), the same one the proxy's break
explainer uses. A difference is reported when it lies inside the cacheable prefix:

- Anthropic: up to the request's last ``cache_control`` breakpoint (nothing after it is cached;
  a request with no breakpoint caches nothing), per
  https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-12-03);
- automatic caching (OpenAI, Gemini): the whole prompt, when it reaches the model's minimum
  cacheable length (``promptcache.minimums``, the linter's conservative value);
- never in the request's own last message alone: that is the dynamic tail (a new question)
  every request may change;
- never where an earlier pair had the same difference in its messages and it was excused
  there: a value from a turn's tail that the conversation then carries as history is that
  difference seen again. A difference an earlier request did not cache for its own reasons (its
  prompt below the minimum, a system or tools segment past its breakpoints) is judged again in
  each later request, which may cache it.

``prompt_cache_key`` and ``model`` are part of the cache key: a difference in either is
reported whatever the prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from promptcache.builtin_tools import builtin_tool_tokens
from promptcache.fingerprint import (
    RequestFingerprint,
    Segment,
    _deepest_difference,
    common_prefix_len,
    first_divergence,
)
from promptcache.minimums import ModelMinimums

from .capture import CallSite, CapturedRequest
from .causes import Region, differing_regions, is_reordering, moved_regions, region_causes
from .findings import CAUSE_RULES, Finding
from .perturbation import Perturbation

__all__ = [
    "EXPLICIT_BREAKPOINT_APIS",
    "PairReport",
    "Sent",
    "cached_extent",
    "compare_runs",
    "pair_runs",
]

#: APIs that cache only up to an explicit breakpoint.
EXPLICIT_BREAKPOINT_APIS = frozenset({"anthropic", "bedrock_converse"})


@dataclass(frozen=True)
class Sent:
    """One captured request with a readable prompt.

    Attributes:
        request: what the endpoint received.
        fingerprint: its segments and hashes.
        routing_key: OpenAI's ``prompt_cache_key`` when sent.
    """

    request: CapturedRequest
    fingerprint: RequestFingerprint
    routing_key: str | None

    @property
    def site(self) -> CallSite | None:
        return self.request.site

    @property
    def api(self) -> str:
        return self.fingerprint.api


def cached_extent(fp: RequestFingerprint) -> int:
    """Index of the last segment the vendor caches (-1: nothing)."""
    if fp.api in EXPLICIT_BREAKPOINT_APIS:
        return max((bp.segment_index for bp in fp.breakpoints), default=-1)
    return len(fp.segments) - 1


def anthropic_tool_tokens(fp: RequestFingerprint, extent: int) -> int:
    """Tokens the API adds for its own tools among segments ``0..extent`` of an Anthropic or
    Bedrock request (``promptcache.builtin_tools``; 0 for other APIs and for tools the request
    defines itself). The fingerprint's ``num_tokens`` already include them."""
    if fp.api not in EXPLICIT_BREAKPOINT_APIS:
        return 0
    added = 0
    for seg in fp.segments[: extent + 1]:
        if seg.kind != "tools" or '"type"' not in seg.text:
            continue
        try:
            tool = json.loads(seg.text)
        except ValueError:
            continue
        if isinstance(tool, dict):
            added += builtin_tool_tokens(tool)
    return added


def prefix_tokens(fp: RequestFingerprint, extent: int) -> int:
    """Approximate tokens of segments ``0..extent``: their text in ``cl100k_base`` tokens, with
    the definitions the Anthropic API adds for its own tools (counted in ``Segment.num_tokens``,
    see ``anthropic_tool_tokens``)."""
    return sum(seg.num_tokens or 0 for seg in fp.segments[: extent + 1])


def minimum_tokens(model: str | None, minimums: ModelMinimums) -> int | None:
    """The model's minimum cacheable prefix (the linter's value where sources disagree)."""
    row = minimums.lookup(model) if model else None
    if row is None:
        return None
    return row.lint_min_tokens if row.lint_min_tokens is not None else row.min_tokens


def _site_key(sent: Sent) -> CallSite | None:
    return sent.site


def pair_runs(base: Sequence[Sent], other: Sequence[Sent]) -> tuple[list[tuple[Sent, Sent]], int]:
    """Pair the two runs' requests per call site; returns the pairs (in baseline order) and
    how many requests of either run found no partner."""
    by_site_a: dict[CallSite | None, list[Sent]] = defaultdict(list)
    by_site_b: dict[CallSite | None, list[Sent]] = defaultdict(list)
    for sent in base:
        by_site_a[_site_key(sent)].append(sent)
    for sent in other:
        by_site_b[_site_key(sent)].append(sent)
    pairs: list[tuple[Sent, Sent]] = []
    unpaired = 0
    for site in by_site_a.keys() | by_site_b.keys():
        left, right = by_site_a.get(site, []), by_site_b.get(site, [])
        for key in (_identity, _masked_identity):
            found, left, right = _pair_equal(key, left, right)
            pairs += found
        pairs += _closest_pairs(left, right)
        unpaired += abs(len(left) - len(right))
    pairs.sort(key=lambda pair: pair[0].request.seq)
    return pairs, unpaired


def _pair_equal(
    key: Callable[[Sent], tuple[object, ...]], left: list[Sent], right: list[Sent]
) -> tuple[list[tuple[Sent, Sent]], list[Sent], list[Sent]]:
    """Pair each of ``left`` in order with the first of ``right`` of the same ``key``;
    returns the pairs and what is left of each side, in order."""
    waiting: dict[tuple[object, ...], list[Sent]] = defaultdict(list)
    for b in right:
        waiting[key(b)].append(b)
    pairs: list[tuple[Sent, Sent]] = []
    rest: list[Sent] = []
    taken: set[int] = set()
    for a in left:
        same = waiting.get(key(a))
        if same:
            match = same.pop(0)
            taken.add(id(match))
            pairs.append((a, match))
        else:
            rest.append(a)
    return pairs, rest, [b for b in right if id(b) not in taken]


#: Where the perturbations write in a text: dates, times and numbers of five digits or more
#: (``2026-12-05 04:05:28.49``, unix times, process ids, random draws), uuids and hex ids.
_VOLATILE: Final = re.compile(r"\d[\d:.\-]{4,}|[0-9a-fA-F]{8,}(?:-[0-9a-fA-F-]{27})?")


def _masked_identity(sent: Sent) -> tuple[object, ...]:
    """What two requests share when they differ only where a perturbation writes (a time, an
    id, a process id): the request with those stretches masked. Workers that each send their
    own document beside a time, in another order in each run, are paired by their documents."""
    fp = sent.fingerprint
    text = "\x00".join(_VOLATILE.sub("\x01", seg.text) for seg in fp.segments)
    return (hashlib.sha256(text.encode()).hexdigest(), fp.api, fp.model)


#: How many of the other run's next unpaired requests a request is compared with for its
#: partner: workers finishing in another order reorder requests only that far apart.
_PARTNER_WINDOW: Final = 16
_WORD: Final = re.compile(r"[\w:.+/-]")


def _closest_pairs(left: list[Sent], right: list[Sent]) -> list[tuple[Sent, Sent]]:
    """Pair requests that have no identical partner, each of ``left`` in order with the one of
    the next ``_PARTNER_WINDOW`` of ``right`` that differs least: the longest shared run of
    segments, then the most segments equal after it (the same question after a system prompt
    that differs), then the fewest characters changed in the first segment that differs; the
    earliest on a tie, so a program that sends its requests in the same order is paired in
    order. Pool workers that put their own data beside a time in the prefix and finish in
    another order are then not compared with each other's data, and two questions sent from
    one call site after a context that differs in both runs are each compared with their own
    question's request."""
    pairs: list[tuple[Sent, Sent]] = []
    waiting = list(right)
    for a in left:
        if not waiting:
            break
        best = 0
        if len(waiting) > 1:
            scores = [_closeness(a, b) for b in waiting[:_PARTNER_WINDOW]]
            best = scores.index(max(scores))
        pairs.append((a, waiting.pop(best)))
    return pairs


def _closeness(a: Sent, b: Sent) -> tuple[int, int, int]:
    """How alike two requests are: segments shared from the start, then how many of the
    segments after those are equal (counted as multisets of segment hashes), then minus the
    characters the first differing segment changes (its length outside the shared start and
    end, widened to whole words)."""
    fa, fb = a.fingerprint, b.fingerprint
    shared = 0
    for x, y in zip(fa.chained, fb.chained, strict=False):
        if x != y:
            break
        shared += 1
    if shared >= min(len(fa.segments), len(fb.segments)):
        return shared, 0, 0
    later = Counter(seg.sha256 for seg in fa.segments[shared + 1 :]) & Counter(
        seg.sha256 for seg in fb.segments[shared + 1 :]
    )
    x, y = fa.segments[shared].text, fb.segments[shared].text
    start = common_prefix_len(x, y)
    end = common_prefix_len(x[start:][::-1], y[start:][::-1])
    # widened to whole words, as the findings' regions are: two uuids, numbers or times share
    # a few characters by chance, which must not decide between otherwise equal partners
    while start > 0 and _WORD.match(x[start - 1]):
        start -= 1
    while end > 0 and _WORD.match(x[len(x) - end]):
        end -= 1
    return shared, sum(later.values()), 2 * (start + end) - len(x) - len(y)


def _identity(sent: Sent) -> tuple[object, ...]:
    """What two requests share when they are the same request: prefix, API, model and key."""
    fp = sent.fingerprint
    return (fp.prefix_hash, fp.api, fp.model, sent.routing_key)


@dataclass
class PairReport:
    """What comparing two runs found.

    Attributes:
        findings: one per difference (repeats not yet merged).
        pairs: request pairs compared.
        unpaired: requests of either run with no partner at their call site.
        below_minimum: pairs whose prompts differ but are shorter than the model's minimum
            cacheable prefix (nothing is cached there, so nothing is reported).
        no_breakpoint: pairs whose prompts differ in an Anthropic/Bedrock request with no
            breakpoint (nothing is cached there, so nothing is reported).
        one_message: pairs whose whole prompt is one message (a legacy completion's
            ``prompt``, a lone user message) and differs: read as the dynamic tail, not
            reported.
    """

    findings: list[Finding]
    pairs: int
    unpaired: int
    below_minimum: int
    no_breakpoint: int = 0
    one_message: int = 0


def compare_runs(
    base: Sequence[Sent],
    other: Sequence[Sent],
    run: Perturbation,
    clocks: Sequence[float],
    minimums: ModelMinimums,
    *,
    replies_vary: bool = False,
) -> PairReport:
    """Pair ``base`` (run 0) with ``other`` (``run``) and report every difference in a
    cacheable prefix or cache key (see the module docstring).

    ``replies_vary``: the answers came from a real model (``--forward``), so a difference in an
    assistant message (the model's own reply fed back as history) is the model's, not the
    program's: it is excused."""
    pairs, unpaired = pair_runs(base, other)
    pids = {s.request.pid for s in (*base, *other) if s.request.pid is not None}
    findings: list[Finding] = []
    excused: set[tuple[int, str, str]] = set()
    # the same, per segment (its hashes in the two runs), for the segments after a pair's first
    # difference, whose chained hashes that earlier difference changed
    excused_segments: set[tuple[str, str]] = set()
    below = no_breakpoint = one_message = 0
    for a, b in pairs:
        findings += _key_findings(a, b, run, pids, clocks)
        fa, fb = a.fingerprint, b.fingerprint
        if fa.api != fb.api:
            continue
        divergence = first_divergence(fa, fb)
        if divergence is None or divergence.change != "changed":
            continue  # equal, or one extends the other: the shared prefix still caches
        k = divergence.index
        mark = (k, fa.chained[k], fb.chained[k])
        if mark in excused:
            continue  # a difference excused earlier (a turn's tail), now carried as history
        extent = min(cached_extent(fa), cached_extent(fb))
        last = len(fa.segments) - 1
        tail = (
            k == last == len(fb.segments) - 1
            and fa.segments[k].kind == "messages"
            and fb.segments[k].kind == "messages"
        )
        reply = replies_vary and _is_reply(fa.segments[k])
        if k > extent or tail or reply:
            if tail or reply or fa.segments[k].kind == "messages":
                # conversation content a later request carries as history: excused there too.
                # A system or tools difference past this request's breakpoints (or in one
                # without any) is not: a later request that caches it is judged on its own
                excused.add(mark)
                excused_segments.add((fa.segments[k].sha256, fb.segments[k].sha256))
            if tail and k == 0:
                one_message += 1
            if extent < 0 and not tail and fa.api in EXPLICIT_BREAKPOINT_APIS:
                no_breakpoint += 1
            continue
        minimum = minimum_tokens(fa.model, minimums)
        if minimum is not None and prefix_tokens(fa, extent) < minimum:
            below += 1  # not excused later: a longer request with this difference caches it
            continue
        found = _segment_findings(a, b, k, divergence.path, run, pids, clocks)
        # Every later cached segment that differs may hold a cache breaker of its own (a tool
        # list from a set does not hide a time in the system prompt after it; in a run that
        # changed one kind, not the clock, the first may be only the unshifted clock ticking
        # on, which finds nothing). A list of one kind in another order was reported at its
        # first difference; the rest of that kind is the same reordering. A rule and cause
        # already found in this request is the same bug again further on (a time in every
        # stored history turn), not reported once per message.
        reported = {(f.rule, f.causes) for f in found}
        permuted = _permuted_kinds(fa, fb)
        done = {fa.segments[k].kind} & permuted
        for j in range(k + 1, min(last, len(fb.segments) - 1) + 1):
            seg_a, seg_b = fa.segments[j], fb.segments[j]
            if seg_a.sha256 == seg_b.sha256:
                continue
            pair = (seg_a.sha256, seg_b.sha256)
            tail = j == last == len(fb.segments) - 1 and seg_a.kind == seg_b.kind == "messages"
            if j > extent or tail or (replies_vary and _is_reply(seg_a)):
                if tail or seg_a.kind == "messages":
                    excused_segments.add(pair)  # carried as history by a later request
                continue
            if pair in excused_segments or seg_a.kind in done:
                continue
            if seg_a.kind in permuted:
                done.add(seg_a.kind)
            path, _ = _deepest_difference(
                seg_a.path, json.loads(seg_a.text), json.loads(seg_b.text)
            )
            for finding in _segment_findings(a, b, j, path, run, pids, clocks):
                if (finding.rule, finding.causes) not in reported:
                    reported.add((finding.rule, finding.causes))
                    found.append(finding)
        findings += found
    return PairReport(findings, len(pairs), unpaired, below, no_breakpoint, one_message)


def _permuted_kinds(fa: RequestFingerprint, fb: RequestFingerprint) -> set[str]:
    """The segment kinds whose segments the two requests hold in another order (the same
    segments of that kind, not in the same order)."""
    out: set[str] = set()
    for kind in {s.kind for s in fa.segments}:
        old = [s.sha256 for s in fa.segments if s.kind == kind]
        new = [s.sha256 for s in fb.segments if s.kind == kind]
        if old != new and Counter(old) == Counter(new):
            out.add(kind)
    return out


def _is_reply(segment: Segment) -> bool:
    """Whether a message segment is the model's own turn (assistant / Gemini ``model``)."""
    if segment.kind != "messages":
        return False
    value = json.loads(segment.text)
    return isinstance(value, dict) and value.get("role") in ("assistant", "model")


def _rule(causes: tuple[str, ...], segment_kind: str) -> str:
    if segment_kind == "tools" and set(causes) <= {"hash_seed", "listdir"}:
        return "PC005"
    return CAUSE_RULES[causes[0]]


def _segment_findings(
    a: Sent,
    b: Sent,
    k: int,
    path: str,
    run: Perturbation,
    pids: set[int],
    clocks: Sequence[float],
) -> list[Finding]:
    seg_a, seg_b = a.fingerprint.segments[k], b.fingerprint.segments[k]
    # the same segments of one kind in another order: only where both differing segments are of
    # that kind. A system message one run adds before the question (a summary an earlier run
    # wrote) meets the other run's question there, and the questions, alike, are no reordering
    kind = seg_a.kind if seg_a.kind == seg_b.kind else None
    reordered = is_reordering(a.fingerprint, b.fingerprint, seg_a.text, seg_b.text, kind)
    # the user's own text where the difference is inside one string, else the canonical JSON
    old_text, new_text = _strings_at(seg_a, seg_b, path) or (seg_a.text, seg_b.text)
    found = differing_regions(old_text, new_text)
    # a reordering is one finding, shown where the two orders first differ
    regions: list[Region | None] = [found[0] if found else None] if reordered else list(found)
    # else a stretch may still be items in another order beside other changes of the segment
    moved = [reordered] if reordered else moved_regions(found, pids, clocks)
    out: list[Finding] = []
    seen: set[tuple[str, ...]] = set()
    for region, in_order in zip(regions, moved, strict=True):
        causes = region_causes(
            region,
            run,
            reordered=in_order,
            listings_before=b.request.listings,
            drawn=b.request.drawn,
            pids=pids,
            clocks=clocks,
        )
        if not causes or causes in seen:
            continue
        seen.add(causes)
        where = "the tool list" if seg_a.kind == "tools" else path
        what = "is in another order" if in_order else "differs"
        before = region.before_excerpt if region is not None else seg_a.text[:60]
        after = region.after_excerpt if region is not None else seg_b.text[:60]
        out.append(
            Finding(
                rule=_rule(causes, seg_a.kind),
                check="difference",
                causes=causes,
                site=a.site,
                api=a.api,
                path=path,
                message=(
                    f"{where} {what} between run 0 and run {run.run}, inside the cacheable prefix"
                ),
                before=before,
                after=after,
                run=run.run,
                moved_in=_moved_in(a.fingerprint, b.fingerprint, seg_a, path) if in_order else None,
            )
        )
    return out


def _moved_in(fa: RequestFingerprint, fb: RequestFingerprint, seg: Segment, path: str) -> str:
    """The list or string whose items are in another order: the list of the segments (``tools``
    for tools in another order), else the path inside the segment up to its first index (the
    string, or the list inside it)."""
    for kinds in (None, {seg.kind}):  # all the segments, or those of the differing kind
        held = [
            Counter(s.sha256 for s in fp.segments if kinds is None or s.kind in kinds)
            for fp in (fa, fb)
        ]
        if held[0] == held[1]:
            return re.sub(r"\[\d+\]$", "", seg.path)
    if not path.startswith(seg.path):
        return path
    rest = path[len(seg.path) :]
    return seg.path + rest.split("[", 1)[0]


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _strings_at(seg_a: Segment, seg_b: Segment, path: str) -> tuple[str, str] | None:
    """The two string values at ``path`` (a JSON path inside the segments), or None when the
    path does not end at a string in both."""
    if not path.startswith(seg_a.path):
        return None
    values: list[Any] = [json.loads(seg_a.text), json.loads(seg_b.text)]
    for match in _STEP.finditer(path[len(seg_a.path) :]):
        key, index = match.group(1), match.group(2)
        for i, value in enumerate(values):
            if key is not None and isinstance(value, dict) and key in value:
                values[i] = value[key]
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                values[i] = value[int(index)]
            else:
                return None
    if isinstance(values[0], str) and isinstance(values[1], str):
        return values[0], values[1]
    return None


def _key_findings(
    a: Sent, b: Sent, run: Perturbation, pids: set[int], clocks: Sequence[float]
) -> list[Finding]:
    out = []
    for field, rule, old, new in (
        ("prompt_cache_key", "PC013", a.routing_key, b.routing_key),
        ("model", "PC011", a.fingerprint.model, b.fingerprint.model),
    ):
        if old == new:
            continue
        words = [old or "", new or ""]
        region = differing_regions(*words)
        causes = region_causes(
            region[0] if region else None,
            run,
            reordered=False,
            listings_before=b.request.listings,
            drawn=b.request.drawn,
            pids=pids,
            clocks=clocks,
        )
        if not causes:
            continue
        out.append(
            Finding(
                rule=rule,
                check="difference",
                causes=causes,
                site=a.site,
                api=a.api,
                path=field,
                message=f"`{field}` (part of the cache key) differs between runs 0 and {run.run}",
                before=old,
                after=new,
                run=run.run,
            )
        )
    return out
