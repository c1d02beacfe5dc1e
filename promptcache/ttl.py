"""TTL advisor: should a cached prefix use no cache, a 5-minute or a 1-hour TTL?

Given the start times of the requests that share one prefix and the prefix size, replay the
requests against each option and price the prefix tokens only (the rest of each request costs
the same under every option):

- ``none``: every request pays the prefix at the input rate.
- ``5m``: a miss writes the prefix at the 5-minute write rate; the entry lives 300 s from the
  start of the request and every hit refreshes it for free (Anthropic: "refreshed free on each
  hit"). A hit pays the cache-read rate.
- ``1h``: a miss writes at the 1-hour write rate; the entry lives 3,600 s from the write. Hits
  are assumed *not* to extend it, which is conservative: it never overstates the 1-hour option.

A request that starts exactly when an entry expires is a miss. The option with the lowest cost
wins; ties go to the simpler option (none, then 5m, then 1h). Rules from
https://platform.claude.com/docs/en/build-with-claude/prompt-caching (checked 2026-11-30); the
choice between TTLs exists on Anthropic and Bedrock, for other vendors the figures only
illustrate what a write premium would cost.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Literal

from promptcache.errors import ConfigError
from promptcache.formatting import exact_places, usd
from promptcache.pricing import ModelPrice, PriceTable, default_price_table
from promptcache.usage import MAX_TOKEN_COUNT

__all__ = [
    "LIFETIME_S",
    "TTLAdvice",
    "TTLOption",
    "TTLWriteCounts",
    "advise_ttl",
    "advise_ttl_counts",
    "write_counts",
]

TTLChoice = Literal["none", "5m", "1h"]
#: Seconds a cache entry of each TTL lives after its last write or read (the one source; the
#: proxy's break classifier reads it too).
LIFETIME_S: Final[dict[str, float]] = {"5m": 300.0, "1h": 3600.0}
_MILLION: Final = Decimal(1_000_000)
#: Price-table families whose vendor lets a request choose a 5-minute or 1-hour TTL (Claude, on
#: the Claude API and on Bedrock: https://platform.claude.com/docs/en/build-with-claude/prompt-caching,
#: checked 2026-11-30); rows of another family get a note that the choice is no setting there.
TTL_CHOICE_FAMILIES: Final = frozenset({"anthropic"})


@dataclass(frozen=True)
class TTLOption:
    """The simulated prefix cost of one option.

    Attributes:
        ttl: ``"none"``, ``"5m"`` or ``"1h"``.
        num_writes: requests that wrote the prefix (for ``none``: requests that paid full input).
        num_reads: requests that read the prefix from the cache.
        write_rate: USD per million tokens paid by each write (the input rate for ``none``).
        read_rate: USD per million tokens paid by each read.
        cost_usd: total prefix cost over all requests (exact Decimal).
    """

    ttl: TTLChoice
    num_writes: int
    num_reads: int
    write_rate: Decimal
    read_rate: Decimal
    cost_usd: Decimal


@dataclass(frozen=True)
class TTLAdvice:
    """The recommendation and the arithmetic behind it; :meth:`explain` renders it as text.

    Attributes:
        recommendation: the cheapest option (ties: none, then 5m, then 1h).
        options: every simulated option, keyed by TTL.
        prefix_tokens: tokens in the shared prefix.
        num_requests: requests replayed.
        span_s: seconds from the first to the last request.
        price: the rates used (USD per million tokens): a tiered row's ``above_tier`` rates
            when the prefix alone exceeds its ``tier_max_input_tokens``.
        note: what the figures rest on, if anything needs saying: the prefix is above the
            row's long-context tier (priced at the higher rates, or underestimated when the row
            has none), or below the model's minimum (the recommendation is forced to none).
    """

    recommendation: TTLChoice
    options: dict[str, TTLOption]
    prefix_tokens: int
    num_requests: int
    span_s: float
    price: ModelPrice
    note: str = ""

    @property
    def savings_usd(self) -> Decimal:
        """How much the recommendation saves against no caching (0 when it is ``none``)."""
        return self.options["none"].cost_usd - self.options[self.recommendation].cost_usd

    def explain(self) -> str:
        """A multi-line, human-readable account of the simulation and the break-even points."""
        p = self.price
        lines = [
            f"TTL advice for {p.model}: prefix of {_count(self.prefix_tokens, 'token')}, "
            f"{_count(self.num_requests, 'request')} over {_duration(self.span_s)}",
            f"  rates (USD per million tokens): input {p.input}, cache read {p.cache_read}, "
            f"5m write {p.cache_write_5m}, 1h write {p.cache_write_1h}",
        ]
        size = _count(self.prefix_tokens, "token")
        places = exact_places([*(o.cost_usd for o in self.options.values()), self.savings_usd])
        for option in self.options.values():
            writes = (
                f"{option.num_writes} uncached"
                if option.ttl == "none"
                else _count(option.num_writes, "write")
            )
            arithmetic = f"{writes} x {size} x ${option.write_rate}/MTok"
            if option.ttl != "none":
                reads = _count(option.num_reads, "read")
                arithmetic += f" + {reads} x {size} x ${option.read_rate}/MTok"
            lines.append(f"  {option.ttl + ':':<5} {arithmetic} = {_usd(option.cost_usd, places)}")
        for ttl in ("5m", "1h"):
            needed = _break_even_reads(p, ttl)
            if needed is None:
                lines.append(f"  break-even {ttl}: reads are not cheaper than input; never pays")
            elif needed == 0:
                lines.append(
                    f"  break-even {ttl}: a write costs no more than input and a read saves "
                    f"${p.input - p.cache_read}/MTok, so a write pays off from its first read "
                    "and costs nothing extra without one"
                )
            else:
                lines.append(
                    f"  break-even {ttl}: a write costs ${_premium(p, ttl)}/MTok over input and a "
                    f"read saves ${p.input - p.cache_read}/MTok, so a write pays off after "
                    f"{needed:.2f} reads ({max(1, math.ceil(needed))} before the entry expires)"
                )
        best = self.options[self.recommendation]
        verdict = f"  recommendation: {self.recommendation} ({_usd(best.cost_usd, places)}"
        if self.recommendation != "none":
            verdict += f", saves {_usd(self.savings_usd, places)} against no caching"
        lines.append(verdict + ")")
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


def _usd(value: Decimal, places: int) -> str:
    return usd(value, places, grouped=False)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s"


def _premium(p: ModelPrice, ttl: str) -> Decimal:
    write = p.cache_write_5m if ttl == "5m" else p.cache_write_1h
    return write - p.input


def _count(n: int, noun: str) -> str:
    """``1 write``, ``3 writes``, ``10,000 tokens``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _break_even_reads(p: ModelPrice, ttl: str) -> float | None:
    """Reads needed per write for the cache to beat paying input every time (None: never)."""
    saving_per_read = p.input - p.cache_read
    if saving_per_read <= 0:
        return None
    return max(0.0, float(_premium(p, ttl) / saving_per_read))


def _simulate(times: Sequence[float], ttl: Literal["5m", "1h"]) -> tuple[int, int]:
    lifetime = LIFETIME_S[ttl]
    writes = reads = 0
    expires_at = -math.inf
    for t in times:
        if t < expires_at:
            reads += 1
            if ttl == "5m":
                expires_at = t + lifetime
        else:
            writes += 1
            expires_at = t + lifetime
    return writes, reads


@dataclass(frozen=True)
class TTLWriteCounts:
    """What the simulation of :func:`advise_ttl` needs of a request sequence: counts only.

    Attributes:
        num_requests: requests replayed (>= 1).
        writes_5m: requests that write under the 5-minute TTL: the first one, and every request
            that starts ``LIFETIME_S["5m"]`` s or more after the one before it
            (``t >= previous + 300`` in float arithmetic; every request refreshes the entry).
        writes_1h: requests that write under the 1-hour TTL: the first one, and then each first
            request that starts at or after the last write + ``LIFETIME_S["1h"]`` s (hits do
            not extend the entry).
        span_s: seconds from the first to the last request.

    A database computes these without shipping start times (one window-function pass for the
    5-minute gaps, one index seek per 1-hour write: :mod:`promptcache.proxy.report.queries`);
    :func:`write_counts` computes them from start times.
    """

    num_requests: int
    writes_5m: int
    writes_1h: int
    span_s: float


def write_counts(timestamps: Sequence[float]) -> TTLWriteCounts:
    """The :class:`TTLWriteCounts` of request start times (seconds, any order, at least one)."""
    times = sorted(float(t) for t in timestamps)
    return TTLWriteCounts(
        len(times), _simulate(times, "5m")[0], _simulate(times, "1h")[0], times[-1] - times[0]
    )


def advise_ttl(
    timestamps: Sequence[float],
    prefix_tokens: int,
    model: str | None = None,
    *,
    rates: ModelPrice | None = None,
    table: PriceTable | None = None,
    min_cacheable_tokens: int | None = None,
) -> TTLAdvice:
    """Recommend ``none``, ``5m`` or ``1h`` for a prefix by simulated cost.

    Args:
        timestamps: request start times in seconds (any epoch; order does not matter).
        prefix_tokens: tokens in the prefix the requests share.
        model: model name to look up in the price table (ignored when ``rates`` is given).
        rates: explicit rates (USD per million tokens) instead of a lookup.
        table: price table to look ``model`` up in (default: the bundled one).
        min_cacheable_tokens: the model's minimum cacheable prefix; below it the vendor does not
            cache at all, so the advice is ``none``.

    A prefix longer than a tiered row's ``tier_max_input_tokens`` (Claude Sonnet 4.5 above
    200,000 tokens) makes every request a long-context one: it is priced at the row's
    ``above_tier`` rates, and ``note`` says so.

    Returns:
        A :class:`TTLAdvice` whose ``options`` hold the arithmetic for every TTL.

    Raises:
        ConfigError: no timestamps, a timestamp that is not a finite number (e.g. a
            ``datetime``), a prefix size below 0 or above ``MAX_TOKEN_COUNT`` (2**40), or
            neither ``model`` nor ``rates``.
        UnknownModelPriceError: ``model`` has no price row and no ``rates`` were given.
    """
    if timestamps is not None and not isinstance(timestamps, (str, bytes, Sequence)):
        try:
            timestamps = list(timestamps)  # a generator would be used up by the checks below
        except TypeError:
            raise ConfigError(
                "advise_ttl needs the request timestamps as a list of seconds, got "
                f"{type(timestamps).__name__}"
            ) from None
    if not timestamps:
        raise ConfigError("advise_ttl needs at least one request timestamp (seconds)")
    for t in timestamps:
        if isinstance(t, bool) or not isinstance(t, numbers.Real):
            raise ConfigError(
                f"request timestamps must be numbers of seconds, got {type(t).__name__} {t!r}; "
                "convert datetimes with .timestamp()"
            )
    if any(not math.isfinite(t) for t in timestamps):
        raise ConfigError("request timestamps must be finite numbers of seconds")
    _check_prefix_tokens(prefix_tokens)
    if rates is None:
        if model is None:
            raise ConfigError("advise_ttl needs a model name or explicit rates")
        rates = (table or default_price_table()).lookup(model)
    return advise_ttl_counts(
        write_counts(timestamps),
        prefix_tokens,
        rates=rates,
        min_cacheable_tokens=min_cacheable_tokens,
    )


def _check_prefix_tokens(prefix_tokens: object) -> None:
    if isinstance(prefix_tokens, bool) or not isinstance(prefix_tokens, int) or prefix_tokens < 0:
        raise ConfigError(f"prefix_tokens must be an int >= 0, got {prefix_tokens!r}")
    if prefix_tokens > MAX_TOKEN_COUNT:
        raise ConfigError(
            f"prefix_tokens is {prefix_tokens}, more than any request can hold (the limit is "
            f"{MAX_TOKEN_COUNT}); pass the prefix size in tokens"
        )


def advise_ttl_counts(
    counts: TTLWriteCounts,
    prefix_tokens: int,
    model: str | None = None,
    *,
    rates: ModelPrice | None = None,
    table: PriceTable | None = None,
    min_cacheable_tokens: int | None = None,
) -> TTLAdvice:
    """:func:`advise_ttl` from a sequence's :class:`TTLWriteCounts` instead of its start times:
    the same advice, option by option (reads are ``num_requests - writes``).

    Raises:
        ConfigError: ``num_requests`` < 1, write counts outside ``1..num_requests``, a negative
            or non-finite span, a prefix size below 0 or above 2**40, or neither ``model`` nor
            ``rates``.
        UnknownModelPriceError: ``model`` has no price row and no ``rates`` were given.
    """
    n = counts.num_requests
    if n < 1:
        raise ConfigError("advise_ttl_counts needs at least one request")
    for name, writes in (("writes_5m", counts.writes_5m), ("writes_1h", counts.writes_1h)):
        if not 1 <= writes <= n:
            raise ConfigError(f"{name} must be between 1 and num_requests ({n}), got {writes}")
    if not math.isfinite(counts.span_s) or counts.span_s < 0:
        raise ConfigError(f"span_s must be a finite number >= 0, got {counts.span_s!r}")
    _check_prefix_tokens(prefix_tokens)
    if min_cacheable_tokens is not None and (
        isinstance(min_cacheable_tokens, bool)
        or not isinstance(min_cacheable_tokens, int)
        or min_cacheable_tokens < 0
    ):
        raise ConfigError(
            f"min_cacheable_tokens must be an int >= 0 or None, got {min_cacheable_tokens!r}"
        )
    if rates is not None and not isinstance(rates, ModelPrice):
        raise ConfigError(
            f"advise_ttl(rates=...) needs a promptcache.ModelPrice, got {type(rates).__name__}"
        )
    if rates is None:
        if model is None:
            raise ConfigError("advise_ttl needs a model name or explicit rates")
        rates = (table or default_price_table()).lookup(model)
    notes: list[str] = []
    if rates.family and rates.family not in TTL_CHOICE_FAMILIES:
        notes.append(
            f"the {rates.model!r} row is of the {rates.family!r} family, whose vendor offers "
            "no 5m/1h TTL to choose (Anthropic and Claude on Bedrock do): the options price "
            "cache lifetimes the vendor sets itself, so the recommendation is no setting"
        )
    tier = rates.tier_max_input_tokens
    if tier is not None and prefix_tokens > tier:
        # every request holds the prefix, so every request is above the tier, billed whole at
        # the higher rates (as cost() prices one request)
        if rates.above_tier is not None:
            notes.append(
                f"the prefix ({prefix_tokens:,} tokens) exceeds the {tier:,}-token tier of the "
                f"{rates.model!r} row, so every request is billed at its above-tier rates"
            )
            rates = dataclasses.replace(rates.above_tier, model=rates.model)
        else:
            notes.append(
                f"the prefix ({prefix_tokens:,} tokens) exceeds the {tier:,}-token tier of the "
                f"{rates.model!r} row, which has no above_tier rates; the vendor bills more "
                "above it, so these figures are underestimates"
            )
    per_token = Decimal(prefix_tokens) / _MILLION
    options: dict[str, TTLOption] = {
        "none": TTLOption("none", n, 0, rates.input, rates.cache_read, n * per_token * rates.input)
    }
    cached: tuple[tuple[Literal["5m", "1h"], int, Decimal], ...] = (
        ("5m", counts.writes_5m, rates.cache_write_5m),
        ("1h", counts.writes_1h, rates.cache_write_1h),
    )
    for ttl, writes, write_rate in cached:
        reads = n - writes
        total = per_token * (writes * write_rate + reads * rates.cache_read)
        options[ttl] = TTLOption(ttl, writes, reads, write_rate, rates.cache_read, total)
    if min_cacheable_tokens is not None and prefix_tokens < min_cacheable_tokens:
        recommendation: TTLChoice = "none"
        notes.append(
            f"the prefix ({prefix_tokens:,} tokens) is below the model's minimum cacheable "
            f"prefix ({min_cacheable_tokens:,}); the vendor would not cache it"
        )
    else:
        choices: tuple[TTLChoice, ...] = ("none", "5m", "1h")
        recommendation = min(choices, key=lambda k: options[k].cost_usd)
    return TTLAdvice(
        recommendation=recommendation,
        options=options,
        prefix_tokens=prefix_tokens,
        num_requests=n,
        span_s=counts.span_s,
        price=rates,
        note="; ".join(notes),
    )
