"""The advice part of ``promptcache report``: TTL per prefix family, then recommendations.

The TTL advisor replays each busy family's request start times through
:func:`promptcache.ttl.advise_ttl` (no cache / 5-minute / 1-hour TTL priced on the family's
typical cached prefix). Only Anthropic-vendor families get TTL advice: the choice of TTL exists
there (and on Bedrock), not at OpenAI or Gemini, and the engine has no TTL at all.

:func:`recommend` then writes the recommendations in the standard escalation order:

1. prefix stability: the costliest break reason with a known fix (:data:`FIXES`), naming its top
   segment, at any hit rate (above :data:`LOW_HIT_RATE`, not ``below_minimum``);
   without one, a low token-weighted hit rate (< :data:`LOW_HIT_RATE`)
   says what else keeps it low (prefixes the upstream dropped, one-off prefixes);
2. TTL: families whose cheapest TTL differs from the one in use (a high hit rate with gaps just
   past the TTL), and TTL expiries in general;
3. cache writes nobody read (the write premium wasted);
4. unexpected misses (same prefix within the TTL, nothing read);
5. engine upstream: KV-pool pressure (usage >= :data:`HIGH_KV_USAGE` or preemptions) -> prefix
   caching when its hit rate is low, else swap space when nothing is swapped, else KV
   quantisation; read from the engine's ``/metrics`` (``--engine-metrics``, see
   :class:`EngineKvStats`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from prometheus_client.parser import text_string_to_metric_families

from promptcache.errors import ConfigError
from promptcache.formatting import percent, usd
from promptcache.minimums import default_model_minimums
from promptcache.pricing import ModelPrice
from promptcache.ttl import advise_ttl_counts

from . import queries as q
from .window import Window

if TYPE_CHECKING:
    from .types import BreakReasonSummary, Summary, WastedWrites

__all__ = [
    "LOW_HIT_RATE",
    "NOTHING_TO_CHANGE",
    "NO_RECOMMENDATIONS",
    "EngineKvStats",
    "Recommendation",
    "TtlAdvice",
    "advise_families",
    "recommend",
]

#: Why :func:`recommend` returned nothing, a sentence; the HTML report's "What to change first"
#: card gives it after "Nothing:".
NOTHING_TO_CHANGE: Final = "caching works as intended in this window."
#: What every list of recommendations says when :func:`recommend` returns nothing.
NO_RECOMMENDATIONS: Final = f"none: {NOTHING_TO_CHANGE}"
#: Below this token-weighted hit rate, prefix stability is the first thing to fix.
LOW_HIT_RATE: Final = 0.5
#: KV-pool use (fraction of blocks) from which the engine is under memory pressure.
HIGH_KV_USAGE: Final = 0.9
#: Below this engine prefix-cache hit rate, prefix caching is the first engine setting to fix.
LOW_ENGINE_PREFIX_HIT_RATE: Final = 0.1
#: A prefix family needs this many requests before its TTL advice becomes a recommendation.
MIN_TTL_REQUESTS: Final = 3
#: Vendors whose API lets the client pick the TTL.
TTL_CHOICE_VENDORS: Final = frozenset({"anthropic"})

#: What to do about each break reason (the fix, in one sentence).
FIXES: Final[dict[str, str]] = {
    "system_changed": "move per-request values (dates, times, ids, user names) out of the "
    "system prompt into the last user message, after the last cache breakpoint",
    "tools_reordered": "send tools in a fixed order (for example sorted by name)",
    "tools_changed": "build tool definitions once (sorted keys, no per-request values) and "
    "keep them byte-identical between requests",
    "messages_changed": "append to the conversation instead of editing earlier messages",
    "history_rewritten": "truncate or summarise history rarely and in large steps (at fixed "
    "turn counts) instead of on every turn",
    "model_changed": "each model has its own cache: keep a conversation on one model",
    "breakpoint_missing": "add `cache_control` to the last block that stays the same "
    "between requests (the system prompt or the last tool)",
    "below_minimum": "the stable prefix is shorter than the model's minimum cacheable "
    "length, so nothing is cached: put more of the stable content first or skip caching",
    # the lookback reasons (proxy/breaks.py, promptcache.lookback; Anthropic's rule,
    # https://platform.claude.com/docs/en/build-with-claude/prompt-caching, checked 2026-12-01)
    "lookback_exceeded": "a breakpoint reads at most 20 block positions back and the turn "
    "appended more: keep a second, sliding breakpoint within 20 positions of the last write "
    "(promptcache's SlidingWindow or PromptBuilder renders do this)",
    "breakpoint_moved": "keep the last breakpoint at or after the previous request's: an "
    "earlier one reads less than the cache holds",
    "anchor_changed": "a structural change: a block (often a whitespace anchor) was inserted "
    "into or removed from an earlier message; keep the message structure fixed once sent",
}
_CONTENT_REASONS: Final = frozenset(FIXES)


@dataclass(frozen=True)
class TtlAdvice:
    """TTL advice for one prefix family (money over the report window, USD).

    Attributes:
        key_fingerprint, model, first_segment_hash: the family.
        requests: requests replayed.
        prefix_tokens: the typical cached prefix priced.
        current: the TTL in use now (``none``, ``5m`` or ``1h``, from its cache writes).
        recommended: the cheapest TTL per :func:`promptcache.ttl.advise_ttl` (from the
            family's counts, :func:`promptcache.ttl.advise_ttl_counts`).
        current_cost_usd, recommended_cost_usd: simulated prefix cost of each.
        savings_usd: ``current_cost_usd - recommended_cost_usd`` (>= 0).
        note: the advisor's note (prefix above the price row's long-context tier, or below
            the model's minimum), or "".
    """

    key_fingerprint: str | None
    model: str | None
    first_segment_hash: str
    requests: int
    prefix_tokens: int
    current: str
    recommended: str
    current_cost_usd: float
    recommended_cost_usd: float
    savings_usd: float
    note: str = ""

    @property
    def label(self) -> str:
        """Short family name for tables: ``key 1a2b3c4d / model / prefix 9f3c1e2a``."""
        key = (self.key_fingerprint or "-")[:8]
        return f"key {key} / {self.model or '-'} / prefix {self.first_segment_hash[:8]}"


def advise_families(
    conn: sqlite3.Connection,
    window: Window,
    price_of: Callable[[str | None], ModelPrice | None],
    *,
    limit: int,
) -> list[TtlAdvice]:
    """TTL advice for the ``limit`` busiest Anthropic families in ``window``."""
    minimums = default_model_minimums()
    out = []
    for family in q.busiest_families(conn, window, limit):
        price = price_of(family.model)
        if family.vendor not in TTL_CHOICE_VENDORS or price is None or family.model is None:
            continue
        counts = q.family_write_counts(conn, family, window)
        if counts is None:  # its rows were deleted after the rollup counted them
            continue
        row = minimums.lookup(family.model)
        advice = advise_ttl_counts(
            counts,
            family.prefix_tokens,
            rates=price,
            min_cacheable_tokens=row.min_tokens if row else None,
        )
        if family.cache_write_1h_tokens:
            current = "1h"
        elif family.cache_write_5m_tokens:
            current = "5m"
        else:
            current = "none"
        now_cost = advice.options[current].cost_usd
        best_cost = advice.options[advice.recommendation].cost_usd
        out.append(
            TtlAdvice(
                key_fingerprint=family.key_fingerprint,
                model=family.model,
                first_segment_hash=family.first_segment_hash,
                requests=family.requests,
                prefix_tokens=family.prefix_tokens,
                current=current,
                recommended=advice.recommendation,
                current_cost_usd=float(now_cost),
                recommended_cost_usd=float(best_cost),
                savings_usd=float(max(now_cost - best_cost, Decimal(0))),
                note=advice.note,
            )
        )
    return out


@dataclass(frozen=True)
class EngineKvStats:
    """The engine upstream's KV-pool state, read from its ``GET /metrics``.

    Attributes:
        kv_usage: fraction of device KV blocks in use, 0..1.
        num_preemptions: sequences preempted for lack of KV blocks since the engine started.
        num_swapped: sequences swapped out to CPU at scrape time (0 when swap is off).
        prefix_cache_hit_rate: prefix-cache hit tokens / looked-up tokens since start, or None
            before any lookup.
    """

    kv_usage: float
    num_preemptions: int
    num_swapped: int
    prefix_cache_hit_rate: float | None

    @classmethod
    def from_prometheus(cls, text: str) -> EngineKvStats:
        """Parse the engine server's Prometheus exposition (``promptcache_engine_*`` series).

        Raises:
            ConfigError: ``text`` is not Prometheus text or lacks the KV usage gauge.
        """
        try:
            values = {
                sample.name: sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
            }
        except ValueError as exc:
            raise ConfigError(f"--engine-metrics: not Prometheus text ({exc})") from None
        prefix = "promptcache_engine_"
        if f"{prefix}kv_cache_usage_ratio" not in values:
            raise ConfigError(
                "--engine-metrics: no promptcache_engine_kv_cache_usage_ratio series; point it "
                "at the engine server's /metrics (promptcache engine serve)"
            )
        queries = values.get(f"{prefix}prefix_cache_queries_tokens_total", 0.0)
        hits = values.get(f"{prefix}prefix_cache_hits_tokens_total", 0.0)
        return cls(
            kv_usage=values[f"{prefix}kv_cache_usage_ratio"],
            num_preemptions=int(values.get(f"{prefix}preemptions_total", 0)),
            num_swapped=int(values.get(f"{prefix}swapped_sequences", 0)),
            prefix_cache_hit_rate=hits / queries if queries else None,
        )


@dataclass(frozen=True)
class Recommendation:
    """One recommendation: ``kind`` (a stable code for scripts) and the sentence to show."""

    kind: str
    message: str


#: Why a request read nothing of a prefix its predecessor had written (its first token was back,
#: so the write had landed; ``expected_hit``): not parallel requests, but an upstream that no
#: longer held it.
_DROPPED = (
    "the upstream no longer held the prefix (an engine evicts it when its KV pool fills and "
    "loses it when it restarts: --kv-cache-bytes, --kv-ram, --kv-disk; a vendor's cache is best "
    "effort: compare with its miss reason)"
)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _were(count: int) -> str:
    return "was" if count == 1 else "were"


def _their(count: int) -> str:
    return "its" if count == 1 else "their"


def _pct(value: float | None) -> str:
    return percent(value)


def _and_usd(total: Summary, reason: BreakReasonSummary) -> str:
    """`` and $X`` after the tokens ``reason`` lost, or nothing for $0 where no request of the
    window, or none of the reason's breaks, is priced."""
    amount = reason.usd_lost
    if not amount and (total.all_unpriced or reason.all_unpriced):
        return ""
    return f" and {usd(amount, grouped=False)}"


def _premium(total: Summary, wasted: WastedWrites) -> str:
    """``, $X write premium`` after the wasted tokens, or nothing for $0 where no request of
    the window, or none of the wasted writes, is priced."""
    amount = wasted.premium_usd
    if not amount and (total.all_unpriced or wasted.all_unpriced):
        return ""
    return f", {usd(amount, grouped=False)} write premium"


def _stability(total: Summary, reasons: Sequence[BreakReasonSummary]) -> Recommendation | None:
    """The prefix-stability recommendation: the costliest break reason that has a fix (its top
    segment, breaks, tokens and dollars lost, an example request and the fix), whatever the hit
    rate; at a low hit rate without such a break, what else keeps the hit rate low (requests
    that sent an unchanged prefix and read nothing; most requests opening a new prefix; hits
    whose input lies mostly after the part that repeats); else None.
    Above the low hit rate, ``below_minimum`` breaks ask for no fix: nothing of a prompt under
    the minimum cacheable prefix is cacheable, so they re-process no cacheable input (they lose
    0 tokens by definition)."""
    low = total.token_hit_rate is not None and total.token_hit_rate < LOW_HIT_RATE
    content = [
        r
        for r in reasons
        if r.reason in _CONTENT_REASONS and r.breaks and (low or r.reason != "below_minimum")
    ]
    rate = _pct(total.token_hit_rate)
    head = f"Token-weighted hit rate is {rate}: make the prefix stable first."
    if content:
        top = content[0]
        where = f"`{top.top_segment}`" if top.top_segment else "the prefix"
        example = f"; e.g. request {top.example_ids[0]}" if top.example_ids else ""
        if not low:
            head = f"Token-weighted hit rate is {rate}, but cache breaks still re-process input."
        return Recommendation(
            "prefix_stability",
            f"{head} Top breaker: {where} ({top.reason}, {_n(top.breaks, 'break')}, "
            f"{top.tokens_lost:,} tokens{_and_usd(total, top)} lost{example}). "
            f"Fix: {FIXES[top.reason]}.",
        )
    if not low:
        return None
    if total.unexpected_misses:
        return Recommendation(
            "prefix_stability",
            f"{head} No prefix change explains it, but "
            f"{_n(total.unexpected_misses, 'request')} sent an unchanged prefix within the TTL, "
            f"after the previous request's first token, and read nothing: {_DROPPED}.",
        )
    if total.new_prefixes * 2 > total.requests_with_usage:
        why = "Most traffic opens new prefixes; caching pays only when the same prefix "
    elif total.hit_requests:
        return Recommendation(
            "prefix_stability",
            f"{head} {total.hit_requests:,} of {total.requests_with_usage:,} requests read from "
            "the cache, but most input comes after the part that repeats between requests: put "
            "what stays the same (instructions, tools, shared documents) first and what varies "
            "last.",
        )
    else:
        why = "Caching pays only when the same prefix "
    return Recommendation(
        "prefix_stability",
        f"{head} {why}repeats within the TTL, so share one frozen prefix (tools, system) across "
        "requests.",
    )


def _engine(kv: EngineKvStats) -> Recommendation | None:
    """Engine escalation: prefix caching, then swap space, then KV quantisation."""
    if kv.kv_usage < HIGH_KV_USAGE and not kv.num_preemptions:
        return None
    state = f"KV pool {percent(kv.kv_usage)} full, {_n(kv.num_preemptions, 'preemption')}"
    rate = kv.prefix_cache_hit_rate
    if rate is None or rate < LOW_ENGINE_PREFIX_HIT_RATE:
        step = (
            f"prefix caching first (hit rate {_pct(rate)}): keep --enable-prefix-caching on and "
            "give requests a shared, stable prefix so they share KV blocks"
        )
    elif not kv.num_swapped:
        step = "add CPU swap space (--swap-space) so preempted sequences are not recomputed"
    else:
        step = "quantise the KV cache (--kv-cache-dtype int8 or fp8) to fit about twice the blocks"
    return Recommendation("engine_kv", f"Engine upstream: {state}; next step: {step}.")


def recommend(
    total: Summary,
    reasons: Sequence[BreakReasonSummary],
    wasted: WastedWrites,
    ttl_advice: Sequence[TtlAdvice],
    engine: EngineKvStats | None = None,
) -> list[Recommendation]:
    """Recommendations in escalation order (see the module docstring); empty when all is well.

    The one list every view shows: ``promptcache report`` prints it, and the HTML page (static
    and the proxy's live ``/report``) leads with its first item and lists them all.
    """
    if not total.total_input_tokens:
        return [Recommendation("no_data", "No requests with token usage in this window.")]
    out: list[Recommendation] = []
    rec = _stability(total, reasons)
    if rec is not None:
        out.append(rec)
    for advice in ttl_advice:
        if (
            advice.recommended != advice.current
            and advice.savings_usd > 0
            and advice.requests >= MIN_TTL_REQUESTS
        ):
            out.append(
                Recommendation(
                    "ttl",
                    f"Prefix family {advice.label}: switch the TTL from {advice.current} to "
                    f"{advice.recommended}; over this window it would cost "
                    f"{usd(advice.recommended_cost_usd, grouped=False)} instead of "
                    f"{usd(advice.current_cost_usd, grouped=False)} for its "
                    f"{advice.prefix_tokens:,}-token prefix ({_n(advice.requests, 'request')}).",
                )
            )
    expired = next((r for r in reasons if r.reason == "ttl_expired"), None)
    if expired is not None and not any(r.kind == "ttl" for r in out):
        out.append(
            Recommendation(
                "ttl",
                f"{_n(expired.breaks, 'request')} came after {_their(expired.breaks)} prefix's "
                "TTL ran out "
                f"({expired.tokens_lost:,} tokens re-processed): where the vendor allows it use "
                "a 1-hour TTL for prefixes reused every few minutes to an hour.",
            )
        )
    if wasted.tokens:
        out.append(
            Recommendation(
                "wasted_writes",
                f"{_n(wasted.requests, 'cache write')} ({wasted.tokens:,} tokens"
                f"{_premium(total, wasted)}) "
                f"{_were(wasted.requests)} never read within {_their(wasted.requests)} TTL"
                + (" and caching cost more than it saved" if total.net_savings_usd < 0 else "")
                + ": put breakpoints only on content that repeats, not on one-off prompts.",
            )
        )
    if total.unexpected_misses and not any(r.kind == "prefix_stability" for r in out):
        out.append(
            Recommendation(
                "unexpected_miss",
                f"{_n(total.unexpected_misses, 'request')} sent an unchanged prefix within the "
                "TTL, after the previous request's first token, but read nothing from the cache: "
                f"{_DROPPED}.",
            )
        )
    if engine is not None:
        rec = _engine(engine)
        if rec is not None:
            out.append(rec)
    return out
