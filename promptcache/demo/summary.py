"""The demo's numbers per variant, and the printout a newcomer reads at the end.

Every figure comes from measurements of this run:

- hit rate: token-weighted, ``sum(cached_tokens) / sum(prompt_tokens)`` over the variant's
  requests, from the usage the engine returned (``prompt_tokens_details.cached_tokens``);
- TTFT: measured by the client (send -> first streamed token), through the proxy;
- a *hit*: a request that read at least 1 prompt token from the cache (``cached_tokens > 0``),
  the definition ``promptcache report`` uses too (``proxy.report.HIT_DEFINITION``); a hit may
  read very little (the naive app's read the few tokens before its timestamp), so TTFT is split
  by the share of each request's prompt read from the cache instead: at least
  :data:`CACHED_SHARE_SPLIT` of it, or less (misses included), and the table shows the median
  share a hit read;
- cost: ``promptcache.pricing.cost`` of each request's real token counts at a vendor model's
  published rates (default ``gpt-5``: OpenAI caches automatically like this engine, cached input
  at 0.1x, no write fee; https://developers.openai.com/api/docs/guides/prompt-caching , checked
  2026-11-30), summed; "without caching" prices every prompt token as uncached input. Only
  vendors that cache a prefix automatically, with no write fee, can price this traffic: the
  engine caches without being asked, and the apps send no breakpoints. A model of a vendor whose
  caching needs breakpoints (Anthropic's ``cache_control``, Bedrock's ``cachePoint``, OpenAI's
  GPT-5.6 ``prompt_cache_breakpoint``) is refused (:func:`check_price_model`): that vendor would
  have cached nothing of these requests, and pricing the engine's hits at its read rate with no
  write fee would invent savings;
- cache breaks: the proxy's explainer (``break_reason``, ``break_segment`` ... columns of its log).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from promptcache.changed_value import changed_value
from promptcache.errors import ConfigError, UnknownModelPriceError
from promptcache.formatting import percent, plural, usd
from promptcache.pricing import ModelPrice, cost, lookup_price
from promptcache.proxy.report import HIT_DEFINITION as REPORT_HIT_DEFINITION
from promptcache.usage import Usage

from .instructions import InstructionsFit
from .workload import RequestResult

__all__ = [
    "AUTOMATIC_CACHING_FAMILIES",
    "CACHED_SHARE_SPLIT",
    "HIT_DEFINITION",
    "BreakExample",
    "BreakSummary",
    "LintFinding",
    "VariantSummary",
    "check_price_model",
    "explanation",
    "group_break_offsets",
    "render_summary",
    "summarize_variant",
    "ttft_sentence",
    "ttft_verdict",
    "value_kind",
    "word_start",
]

#: Price-table families whose vendor caches a repeated prefix without breakpoints and bills no
#: write (shared/reference/vendor-caching.md: OpenAI before GPT-5.6, Gemini 2.5+ implicit
#: caching; checked 2026-12-01). Only these can price the demo's engine traffic.
AUTOMATIC_CACHING_FAMILIES = frozenset({"openai-gpt5", "openai-gpt4-1", "openai-gpt4o", "gemini"})


def check_price_model(price_model: str) -> ModelPrice:
    """The price row of ``price_model`` if its vendor caches automatically with no write fee.

    Raises:
        ConfigError: no row matches ``price_model``, or the vendor's caching needs breakpoints
            the demo's apps do not send (see the module docstring); the message names models
            that work.
    """
    use = (
        "Use a model whose vendor caches automatically: gpt-5 (default), gpt-4.1, gpt-4o, "
        "gemini-2.5-flash, gemini-2.5-pro."
    )
    try:
        price = lookup_price(price_model)
    except UnknownModelPriceError:
        # the pricing error's advice (rates=, --rates FILE) is for `promptcache cost`, which
        # the demo does not take
        raise ConfigError(
            f"--price-as {price_model}: no such model in the price table. {use}"
        ) from None
    if price.family not in AUTOMATIC_CACHING_FAMILIES or price.cache_write_5m > price.input:
        raise ConfigError(
            f"--price-as {price_model}: {price.model} caches only at breakpoints the request "
            "marks (and may bill writes), and the demo's apps mark none, so that vendor would "
            "have cached nothing; pricing the engine's cache hits at its rates would invent "
            f"savings. {use}"
        )
    return price


#: What a cache hit is: the report's definition (a request that read >= 1 cached token).
HIT_DEFINITION = REPORT_HIT_DEFINITION
#: TTFT is split at this share of a request's prompt read from the cache (at or above / below).
CACHED_SHARE_SPLIT = 0.5


@dataclass(frozen=True)
class LintFinding:
    """One ``promptcache lint`` finding: ``path:line`` and the line where the value is born."""

    path: str
    line: int
    code: str
    message: str
    origin_line: int | None


@dataclass(frozen=True)
class BreakExample:
    """Requests of one break reason whose first change lies in the same value of the changed
    text (the text the user wrote): ``offset`` is the character where that value starts (a run
    of letters, digits and ``:-_.,+/``, :func:`promptcache.changed_value.changed_value`), so
    times that differ in their seconds or ids that share a first character are one group.
    ``kind`` names the value when its shape says (``a time``, ``an id``...). With one redacted
    ``-before``/``+after`` excerpt."""

    offset: int | None
    requests: int
    excerpt: str | None
    kind: str | None = None


def _excerpt_sides(excerpt: str | None) -> tuple[str, str] | None:
    lines = (excerpt or "").split("\n")
    if len(lines) != 2 or not lines[0].startswith("-") or not lines[1].startswith("+"):
        return None
    return lines[0][1:], lines[1][1:]


def word_start(offset: int, excerpt: str | None) -> int:
    """The offset where the value holding the first changed character starts.

    ``excerpt`` is the explainer's ``-before\n+after`` (up to 30 characters on each side of
    ``offset``); the characters both lines share before the change are the text just before
    ``offset``, and the value characters at their end belong to the changed value.
    """
    sides = _excerpt_sides(excerpt)
    if sides is None:
        return offset
    before, after = sides
    shared = 0
    while shared < min(len(before), len(after)) and before[shared] == after[shared]:
        shared += 1
    value = changed_value(before, after, shared)
    return max(0, offset - (shared - value.start))


def value_kind(excerpt: str | None) -> str | None:
    """The kind of the value that changed in the explainer's excerpt (``a time``...), or None."""
    sides = _excerpt_sides(excerpt)
    return changed_value(*sides).kind if sides is not None else None


def group_break_offsets(
    rows: Sequence[tuple[int | None, str | None]], limit: int
) -> tuple[tuple[BreakExample, ...], int]:
    """Group one reason's ``(break_offset, break_excerpt)`` rows by :func:`word_start`.

    Returns the ``limit`` largest groups (most requests first, then lowest offset) and how many
    rows are in none of them (other words, or no offset known): together they count every row.
    """
    groups: dict[int, list[str | None]] = {}
    for offset, excerpt in rows:
        if offset is not None:
            groups.setdefault(word_start(offset, excerpt), []).append(excerpt)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    examples = []
    for at, excerpts in ranked:
        excerpt = max((e for e in excerpts if e), default=None)
        examples.append(BreakExample(at, len(excerpts), excerpt, value_kind(excerpt)))
    return tuple(examples), len(rows) - sum(e.requests for e in examples)


@dataclass(frozen=True)
class BreakSummary:
    """One cache-break reason from the proxy's log.

    Attributes:
        reason: the explainer's code, e.g. ``system_changed``.
        requests: how many requests it explained.
        tokens_lost: the report's estimate of prompt tokens the break kept from being reused.
        segment: the segment that changed most often (``messages[0].content``: the system
            message of an OpenAI chat request).
        examples: the most common changed words in that segment, most requests first.
        other_requests: requests of this reason in none of ``examples`` (another word or
            segment, or no offset known): ``sum(examples) + other_requests == requests``.
    """

    reason: str
    requests: int
    tokens_lost: int
    segment: str | None
    examples: tuple[BreakExample, ...] = ()
    other_requests: int = 0


@dataclass(frozen=True)
class VariantSummary:
    """One app's run. Tokens are counts, times ms, money USD (``Decimal``).

    ``hit_requests``: requests that read >= 1 cached token (:data:`HIT_DEFINITION`).
    ``ttft_*_p50_ms`` is None when no request fell in that class; ``ttft_p50_ms`` is over all.
    ``mostly_cached_requests``: requests that read at least :data:`CACHED_SHARE_SPLIT` of their
    prompt from the cache; ``ttft_mostly_cached_p50_ms`` / ``ttft_mostly_uncached_p50_ms`` the
    TTFT medians of those and of the others (misses included). ``hit_share_p50``: the median
    share of its prompt a hit read (None without hits).
    """

    name: str
    app_path: str
    requests: int
    users: int
    wall_s: float
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    hit_rate: float
    hit_requests: int
    ttft_hit_p50_ms: float | None
    ttft_miss_p50_ms: float | None
    ttft_p50_ms: float | None
    price_model: str
    cost_usd: Decimal
    cost_without_cache_usd: Decimal
    breaks: tuple[BreakSummary, ...] = ()
    report_path: str | None = None
    lint: tuple[LintFinding, ...] = field(default=())
    mostly_cached_requests: int = 0
    ttft_mostly_cached_p50_ms: float | None = None
    ttft_mostly_uncached_p50_ms: float | None = None
    hit_share_p50: float | None = None

    @property
    def savings_usd(self) -> Decimal:
        return self.cost_without_cache_usd - self.cost_usd

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (money as strings, exact)."""
        data = asdict(self)
        for key in ("cost_usd", "cost_without_cache_usd"):
            data[key] = str(data[key])
        data["savings_usd"] = str(self.savings_usd)
        data["hit_definition"] = HIT_DEFINITION
        return data


def _mostly_cached(r: RequestResult) -> bool:
    """Whether ``r`` read at least :data:`CACHED_SHARE_SPLIT` of its prompt from the cache."""
    return r.prompt_tokens > 0 and r.cached_tokens >= CACHED_SHARE_SPLIT * r.prompt_tokens


def _p50(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize_variant(
    name: str,
    app_path: str,
    results: Sequence[RequestResult],
    *,
    users: int,
    wall_s: float,
    price_model: str,
    breaks: Sequence[BreakSummary] = (),
    report_path: str | None = None,
    lint: Sequence[LintFinding] = (),
) -> VariantSummary:
    """Aggregate one variant's request results (see the module docstring for definitions).

    Raises:
        UnknownModelPriceError: ``price_model`` has no price row.
    """
    prompt = sum(r.prompt_tokens for r in results)
    cached = sum(r.cached_tokens for r in results)
    hits = [r for r in results if r.cached_tokens > 0]
    misses = [r for r in results if r.cached_tokens <= 0]
    mostly = [r for r in results if _mostly_cached(r)]
    rest = [r for r in results if not _mostly_cached(r)]
    total = Decimal(0)
    without = Decimal(0)
    for r in results:
        breakdown = cost(Usage.from_openai_chat(r.usage), price_model)
        total += breakdown.total_usd
        without += breakdown.cost_without_cache_usd
    return VariantSummary(
        name=name,
        app_path=app_path,
        requests=len(results),
        users=users,
        wall_s=wall_s,
        prompt_tokens=prompt,
        cached_tokens=cached,
        output_tokens=sum(r.output_tokens for r in results),
        hit_rate=cached / prompt if prompt else 0.0,
        hit_requests=len(hits),
        ttft_hit_p50_ms=_p50([r.ttft_ms for r in hits]),
        ttft_miss_p50_ms=_p50([r.ttft_ms for r in misses]),
        ttft_p50_ms=_p50([r.ttft_ms for r in results]),
        price_model=price_model,
        cost_usd=total,
        cost_without_cache_usd=without,
        breaks=tuple(breaks),
        report_path=report_path,
        lint=tuple(lint),
        mostly_cached_requests=len(mostly),
        ttft_mostly_cached_p50_ms=_p50([r.ttft_ms for r in mostly]),
        ttft_mostly_uncached_p50_ms=_p50([r.ttft_ms for r in rest]),
        hit_share_p50=_p50([r.cached_tokens / r.prompt_tokens for r in hits]),
    )


# -- printout ---------------------------------------------------------------------------------


def _ms(value: float | None, n: int) -> str:
    return "n/a (none)" if value is None else f"{value:,.0f} ms ({n} req.)"


def _usd(value: Decimal) -> str:
    return usd(value, 6)


def _saved(v: VariantSummary) -> str:
    if not v.cost_without_cache_usd:
        return "$0"
    return f"{_usd(v.savings_usd)} ({percent(v.savings_usd / v.cost_without_cache_usd)})"


#: (label, cell) rows of the results table; each cell formats one variant.
_ROWS: tuple[tuple[str, Callable[[VariantSummary], str]], ...] = (
    ("requests", lambda v: f"{v.requests} ({plural(v.users, 'user')})"),
    ("prompt tokens sent", lambda v: f"{v.prompt_tokens:,}"),
    ("  served from the prefix cache", lambda v: f"{v.cached_tokens:,}"),
    ("hit rate (token-weighted)", lambda v: f"[bold]{percent(v.hit_rate)}[/bold]"),
    ("requests with a cache hit (>= 1 cached token)", lambda v: f"{v.hit_requests}"),
    ("  share of its prompt a hit read, median", lambda v: percent(v.hit_share_p50)),
    ("TTFT p50, all requests", lambda v: _ms(v.ttft_p50_ms, v.requests)),
    (
        "TTFT p50, >= half the prompt from cache",
        lambda v: _ms(v.ttft_mostly_cached_p50_ms, v.mostly_cached_requests),
    ),
    (
        "TTFT p50, < half from cache (or none)",
        lambda v: _ms(v.ttft_mostly_uncached_p50_ms, v.requests - v.mostly_cached_requests),
    ),
    ("cost, with caching", lambda v: _usd(v.cost_usd)),
    ("cost if nothing were cached", lambda v: _usd(v.cost_without_cache_usd)),
    ("saved by caching", _saved),
)


def render_summary(
    console: Console,
    naive: VariantSummary,
    layered: VariantSummary,
    instructions: InstructionsFit | None = None,
) -> None:
    """Print the results table, why the naive app's cache broke, and what it all means.

    ``instructions``: the system prompt both apps sent (its size goes in the explanation).
    """
    table = Table(
        title=f"Results (same users, same questions; cost of input + output tokens at "
        f"{naive.price_model} rates)",
        title_justify="left",
    )
    table.add_column("")
    table.add_column(f"naive app\n{naive.app_path}", justify="right")
    table.add_column(f"layered app\n{layered.app_path}", justify="right")
    for label, cell in _ROWS:
        table.add_row(label, cell(naive), cell(layered))
    console.print(table)
    if naive.breaks:
        console.print("\n[bold]Why the naive app's cache broke[/bold] (from its proxy's log):")
        for b in naive.breaks:
            where = f" in {b.segment}" if b.segment else ""
            console.print(f"  {b.reason}{where}: {b.requests} of {naive.requests} requests")
            for example in b.examples:
                at = "" if example.offset is None else f" at character {example.offset}"
                n = f"{example.requests} request{'s' if example.requests != 1 else ''}"
                what = example.kind or "the word"
                console.print(f"    first difference in {what}{at} of the text ({n}), e.g.")
                for line in (example.excerpt or "").splitlines():
                    console.print(f"      {escape(line)}")
            if b.other_requests and b.examples:
                n = f"{b.other_requests} request{'s' if b.other_requests != 1 else ''}"
                console.print(f"    first difference elsewhere ({n})")
    console.print()
    console.print(explanation(naive, layered, instructions))


def explanation(
    naive: VariantSummary, layered: VariantSummary, instructions: InstructionsFit | None = None
) -> str:
    """The "What this means" paragraph. Each sentence states this run's numbers; every
    comparison (sooner, later, caught, missed) is chosen by those numbers."""
    lines = ["[bold]What this means[/bold]"]
    size = f" ({instructions.tokens:,} tokens)" if instructions is not None else ""
    lines.append(
        f"- Both apps send the same instructions{size}. The naive one starts its system prompt "
        f"with the current time and a request id, so its prompt changes within the first line: the "
        f"engine reused {percent(naive.hit_rate)} of its prompt tokens. " + _lint_sentence(naive)
    )
    lines.append(
        f"- The layered app (promptcache.PromptBuilder) puts the frozen instructions first, then "
        f"the child's profile, the conversation, and only then the time and the question: "
        f"{percent(layered.hit_rate)} of its prompt tokens came from the cache."
    )
    ttft = ttft_sentence(naive, layered)
    if ttft:
        lines.append(ttft)
    price = lookup_price(naive.price_model)
    ratio = price.cache_read / price.input if price.input else Decimal(0)
    lines.append(
        f"- Money: at {naive.price_model}'s rates (cached input costs {percent(ratio)} of "
        f"normal input; {price.source_url}), the layered app's requests cost "
        f"{_usd(layered.cost_usd)} instead of {_usd(layered.cost_without_cache_usd)}; the naive "
        f"app paid {_usd(naive.cost_usd)} for the same questions."
    )
    reports = [v.report_path for v in (naive, layered) if v.report_path]
    if reports:
        lines.append("- Open the reports (charts, break reasons, advice): " + ", ".join(reports))
    return "\n".join(lines)


def _lint_sentence(naive: VariantSummary) -> str:
    if not naive.lint:
        return f"`promptcache lint` reported nothing for {naive.app_path} in this run."
    found = ", ".join(f"{f.code} at line {f.line}" for f in naive.lint)
    return f"`promptcache lint` catches this before it ships ({found} of {naive.app_path})."


def _sooner(fast_ms: int, slow_ms: int) -> str:
    """How much sooner ``fast_ms`` is than ``slow_ms`` (both rounded ms, fast < slow)."""
    ratio = slow_ms / fast_ms if fast_ms > 0 else None
    if ratio is None or f"{ratio:.1f}" == "1.0":
        return f"{slow_ms - fast_ms:,} ms sooner"
    return f"{ratio:.1f}x sooner"


def ttft_sentence(naive: VariantSummary, layered: VariantSummary) -> str | None:
    """Cached against uncached time to first token, as this run measured it: both apps'
    medians over all their requests, each with the share of its prompt tokens it read from
    the cache, then which came sooner and by how much (:func:`ttft_verdict`). None if an app
    has no requests."""
    if naive.ttft_p50_ms is None or layered.ttft_p50_ms is None:
        return None
    layered_ms, naive_ms = round(layered.ttft_p50_ms), round(naive.ttft_p50_ms)
    return (
        f"- Time to first token, median over all requests: {layered_ms:,} ms for the layered "
        f"app, which read {percent(layered.hit_rate)} of its prompt tokens from the cache, "
        f"vs {naive_ms:,} ms for the naive app, which read {percent(naive.hit_rate)} "
        f"({layered.requests} and {naive.requests} requests): "
        f"{ttft_verdict(layered, layered_ms, naive, naive_ms)}. A cache hit is "
        f"{HIT_DEFINITION}, however little it read: {_hit_share(naive)}, "
        f"{_hit_share(layered)}. So the table splits each app's requests by the share of their "
        "prompt read from the cache: at least half, or less (misses included)."
    )


def _hit_share(v: VariantSummary) -> str:
    """What a hit of ``v`` read, as a median share of its prompt."""
    if v.hit_share_p50 is None:
        return f"the {v.name} app had no hits"
    return f"the {v.name} app's hits read a median {percent(v.hit_share_p50)} of their prompt"


def ttft_verdict(a: VariantSummary, a_ms: int, b: VariantSummary, b_ms: int) -> str:
    """Which of two apps got its first tokens sooner (medians ``a_ms``, ``b_ms``, rounded ms),
    naming the one that read more of its prompt from the cache as such when the hit rates
    differ (at the 0.1% shown); no claim of cause."""
    if percent(b.hit_rate) != percent(a.hit_rate) and b.hit_rate > a.hit_rate:
        a, a_ms, b, b_ms = b, b_ms, a, a_ms
    if percent(a.hit_rate) == percent(b.hit_rate):
        who = f"the {a.name} app"
    else:
        who = f"the {a.name} app, which read more from the cache,"
    if a_ms < b_ms:
        return f"{who} got its first tokens {_sooner(a_ms, b_ms)}"
    if a_ms > b_ms:
        return f"{who} got its first tokens later, by {a_ms - b_ms:,} ms"
    return "the two medians are equal"
