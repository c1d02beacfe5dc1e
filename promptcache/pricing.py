"""Dated price table and ``cost(usage, model)`` in exact decimal USD.

All rates are USD per million tokens. The bundled table is ``promptcache/data/prices.toml``: one
row per model with input, output, cache-read, 5-minute and 1-hour cache-write rates, plus the
source URL and the date the row was checked (2026-11-30 for the bundled rows). Users override
rows with their own TOML file in the same format (:func:`load_price_table`) or pass a
:class:`ModelPrice` directly. An unknown model is an error, never a silent 0.

Cost formula (https://platform.claude.com/docs/en/about-claude/pricing, checked 2026-11-30)::

    cost = uncached_input x input + cache_read x cache_read_rate
         + cache_write_5m x write_5m_rate + cache_write_1h x write_1h_rate
         + cache_write_unknown x write_5m_rate + output x output_rate
    cost_without_cache = total_input x input + output x output
    savings = cost_without_cache - cost        (negative when writes are not re-read)

Long-context tiers: a row with ``tier_max_input_tokens`` and ``above_tier`` rates prices a request
whose input (uncached + cache reads + cache writes, as Anthropic and Google count it for the
threshold) exceeds the tier wholly at the ``above_tier`` rates, output included; at exactly the
threshold the base rates apply (https://platform.claude.com/docs/en/about-claude/pricing#long-context-pricing,
https://ai.google.dev/gemini-api/docs/pricing, checked 2026-12-01).

Model-name matching, in order (the first hit wins):

1. the exact name or an ``aliases`` entry (case-insensitive);
2. the name with, cumulatively: a path prefix removed (``models/gemini-2.5-pro``), a Bedrock
   cross-region prefix removed (``us.``, ``eu.``, ``apac.``, ``global.``, ...), a ``-vN:M`` /
   ``:N`` version suffix removed, a Vertex ``@...`` suffix removed, a dated-snapshot suffix
   removed (``-20250929``, ``-2024-08-06``) and a ``-latest`` suffix removed. So
   ``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5`` and
   ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` -> ``anthropic.claude-sonnet-4-5``;
3. for a Bedrock ``<provider>.<model>`` id with no row, the row of ``<model>`` (with a warning).

Names are never matched by a bare prefix: ``gpt-4o-mini`` never falls back to ``gpt-4o``.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import Any, Final

from promptcache.errors import ConfigError, UnknownModelPriceError, UsageParseError
from promptcache.usage import Usage

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "COST_TERMS",
    "CostBreakdown",
    "FamilyMultipliers",
    "ModelPrice",
    "PriceTable",
    "cost",
    "default_price_table",
    "load_price_table",
    "lookup_price",
]

#: The priced terms of a :class:`CostBreakdown`, in display order.
COST_TERMS: Final = (
    "uncached_input",
    "cache_read",
    "cache_write_5m",
    "cache_write_1h",
    "cache_write_unknown",
    "output",
)
_RATE_KEYS: Final = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")
_CACHE_KEYS: Final = ("cache_read", "cache_write_5m", "cache_write_1h")
#: The keys a price file may hold, at the top, in a ``[families.*]`` table and in a
#: ``[models.*]`` row (or its ``above_tier``): anything else is a typo whose rate would be
#: silently replaced by a derived one, so it is refused.
_TABLE_KEYS: Final = ("families", "models")
_FAMILY_KEYS: Final = (*_CACHE_KEYS, "source_url", "checked", "note")
_ROW_KEYS: Final = (
    "family",
    *_RATE_KEYS,
    "source_url",
    "checked",
    "aliases",
    "tier_max_input_tokens",
    "above_tier",
    "exception",
    "note",
)


def _check_keys(spec: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = [str(key) for key in spec if key not in allowed]
    if unknown:
        raise ConfigError(
            f"{where} has unknown key(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(allowed)}"
        )


_MILLION: Final = Decimal(1_000_000)


#: The highest rate (or multiplier) a price table may give: $1 a token. The dearest bundled
#: row is $75 per million; a Decimal has no overflow, so a slip such as ``input = "1e400"``
#: would otherwise price every request in 400-digit dollar amounts.
MAX_RATE: Final = Decimal(1_000_000)


def _decimal(value: object, what: str) -> Decimal:
    """A rate as an exact Decimal; floats go through ``str`` so 0.3 stays 0.3. Refused unless
    finite, not negative and at most :data:`MAX_RATE`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ConfigError(f"{what} must be a number or a numeric string, got {value!r}")
    try:
        result = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise ConfigError(f"{what} must be a number, got {value!r}") from None
    if not result.is_finite() or not 0 <= result <= MAX_RATE:
        raise ConfigError(f"{what} must be a finite number from 0 to {MAX_RATE}, got {value!r}")
    return result


@dataclass(frozen=True)
class ModelPrice:
    """One model's list rates, USD per million tokens (Decimal; ints, floats and strings given
    here are converted exactly).

    Attributes:
        model: the table key (canonical model name).
        input, output: base input and output rates.
        cache_read: cache hit / refresh rate.
        cache_write_5m: 5-minute cache-write rate (also used for writes of unreported TTL).
        cache_write_1h: 1-hour cache-write rate.
        source_url: where the rates come from.
        checked: ISO date the rates were last compared with ``source_url``.
        family: the ``[families.*]`` entry whose multipliers the cache rates follow.
        aliases: other names that mean exactly this model.
        tier_max_input_tokens: the rates hold up to this many input tokens per request (the
            vendor bills a higher tier above it); ``None`` when untiered. Input is counted as
            the vendor counts it for the threshold: uncached + cache reads + cache writes
            (:attr:`Usage.total_input_tokens <promptcache.usage.Usage.total_input_tokens>`).
        above_tier: the rates of a request above ``tier_max_input_tokens``; every token of such
            a request (input, cache reads and writes, output) is billed at them. ``None``: not
            known, and :func:`cost` warns that its figure is an underestimate.
        exception: why the cache ratios differ from the family's multipliers, if they do.
        note: free text for readers.

    Raises:
        ConfigError: ``model`` is not a str; a rate is negative, not finite or not a number;
            ``aliases`` is a str (pass a list of names) or holds a name that is not a str;
            ``tier_max_input_tokens`` is not a positive int or None; ``above_tier`` is not a
            ModelPrice (or is tiered itself), or is given without a tier.
    """

    model: str
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal
    source_url: str = ""
    checked: str = ""
    family: str = ""
    aliases: tuple[str, ...] = ()
    tier_max_input_tokens: int | None = None
    above_tier: ModelPrice | None = None
    exception: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str):
            raise ConfigError(
                f"ModelPrice(model=...) needs the model name (str), got {type(self.model).__name__}"
            )
        for key in _RATE_KEYS:
            object.__setattr__(self, key, _decimal(getattr(self, key), f"{self.model}.{key}"))
        aliases = self.aliases
        if isinstance(aliases, str):  # would be read one character at a time
            raise ConfigError(
                f"{self.model}.aliases must be a list of names, got the string {aliases!r}; "
                f"pass a list: aliases=[{aliases!r}]"
            )
        if not isinstance(aliases, (list, tuple)) or not all(isinstance(a, str) for a in aliases):
            raise ConfigError(
                f"{self.model}.aliases must be a list of names (str), got {aliases!r}"
            )
        object.__setattr__(self, "aliases", tuple(aliases))
        tier = self.tier_max_input_tokens
        if tier is not None and (isinstance(tier, bool) or not isinstance(tier, int) or tier <= 0):
            raise ConfigError(
                f"{self.model}.tier_max_input_tokens must be a positive integer (input tokens) "
                f"or None, got {tier!r}"
            )
        above = self.above_tier
        if above is not None and not isinstance(above, ModelPrice):
            raise ConfigError(
                f"{self.model}.above_tier must be a ModelPrice (the rates above the tier) or "
                f"None, got {type(above).__name__}"
            )
        if above is not None and tier is None:
            raise ConfigError(f"{self.model}: above_tier rates need tier_max_input_tokens")
        if above is not None and above.tier_max_input_tokens is not None:
            raise ConfigError(f"{self.model}.above_tier cannot itself be tiered")

    def rate(self, term: str) -> Decimal:
        """The USD/MTok rate that applies to a :data:`COST_TERMS` entry."""
        return {
            "uncached_input": self.input,
            "cache_read": self.cache_read,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "cache_write_unknown": self.cache_write_5m,
            "output": self.output,
        }[term]


@dataclass(frozen=True)
class FamilyMultipliers:
    """A vendor family's documented cache multipliers relative to the base input rate."""

    name: str
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal
    source_url: str = ""
    checked: str = ""
    note: str = ""


_REGION_PREFIX = re.compile(r"^(?:us|eu|apac|ap|jp|au|ca|us-gov|global)\.(?=[a-z0-9-]+\.)")
_VERSION_SUFFIX = re.compile(r"(?:-v\d+(?::\d+)?|:\d+)$")
_VERTEX_SUFFIX = re.compile(r"@[\w.-]+$")
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
_LATEST_SUFFIX = re.compile(r"-latest$")


def _name_candidates(model: str) -> list[str]:
    """The exact name, then each cumulative normalisation step described in the module doc."""
    name = model.strip().lower()
    candidates = [name]
    for step in (
        lambda s: s.rsplit("/", 1)[-1],
        lambda s: _REGION_PREFIX.sub("", s),
        lambda s: _VERSION_SUFFIX.sub("", s),
        lambda s: _VERTEX_SUFFIX.sub("", s),
        lambda s: _DATE_SUFFIX.sub("", s),
        lambda s: _LATEST_SUFFIX.sub("", s),
    ):
        name = step(name)
        if name != candidates[-1]:
            candidates.append(name)
    return candidates


#: Model names whose ``PriceTable.match`` answer a table keeps (emptied when full).
_MATCH_CACHE_SIZE = 1024


@dataclass(frozen=True)
class PriceTable:
    """Model rows and family multipliers; look rows up with :meth:`lookup`.

    Build one with :func:`default_price_table` or :func:`load_price_table`; combine a user file
    with the bundled table through :meth:`with_fallback`.
    """

    models: Mapping[str, ModelPrice]
    families: Mapping[str, FamilyMultipliers] = field(default_factory=dict)
    _index: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: ``match``'s answer per model name: the row and warning, or the message of the
    #: ``UnknownModelPriceError`` it raised (the close-match search reads every row)
    _matches: dict[str, tuple[ModelPrice, str | None] | str] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for key, row in self.models.items():
            self._index[key.lower()] = key
            for alias in row.aliases:
                self._index.setdefault(alias.lower(), key)

    def with_fallback(self, other: PriceTable) -> PriceTable:
        """A table whose rows and families are this table's, then ``other``'s for the rest.

        Names follow the rows: every name this table gives (a row's own or an alias) finds this
        table's row, also where ``other`` has a row of that name; an alias ``other`` gives a row
        that this table replaces (same key) finds the replacement, which prices the same model.
        """
        merged = PriceTable(
            models={**other.models, **self.models}, families={**other.families, **self.families}
        )
        index = {name: key for name, key in other._index.items() if key not in self.models}
        for name, key in other._index.items():
            if key in self.models:
                index.setdefault(name, key)
        index.update(self._index)
        merged._index.clear()
        merged._index.update(index)
        return merged

    def match(self, model: str) -> tuple[ModelPrice, str | None]:
        """The row for ``model`` and a warning when a fallback row was used (see module doc).

        Raises:
            ConfigError: ``model`` is not a str.
            UnknownModelPriceError: no row matches; the message names close matches and how to
                supply rates.
        """
        if not isinstance(model, str):
            raise ConfigError(f"model must be a model name (str), got {type(model).__name__}")
        known = self._matches.get(model)
        if known is None:
            if len(self._matches) >= _MATCH_CACHE_SIZE:
                self._matches.clear()
            known = self._matches[model] = self._match(model)
        if isinstance(known, str):
            raise UnknownModelPriceError(known)
        return known

    def _match(self, model: str) -> tuple[ModelPrice, str | None] | str:
        """``match``'s answer, the error as its message."""
        candidates = _name_candidates(model)
        for name in candidates:
            if name in self._index:
                return self.models[self._index[name]], None
        provider, dot, rest = candidates[-1].partition(".")
        if dot and rest in self._index:
            row = self.models[self._index[rest]]
            return row, (
                f"no {provider} price row for {model!r}; priced with the {row.model!r} row "
                f"({row.source_url}); pass rates if the {provider} list price differs"
            )
        close = difflib.get_close_matches(candidates[-1], sorted(self._index), n=3, cutoff=0.6)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        return (
            f"no price for model {model!r}.{hint} Pass rates=ModelPrice(...) to cost() or "
            "advise_ttl(), or "
            f'--rates FILE with a [models."{candidates[-1]}"] row (input, output, cache_read, '
            "cache_write_5m, cache_write_1h in USD per million tokens) to `promptcache cost`."
        )

    def lookup(self, model: str) -> ModelPrice:
        """The row for ``model`` (see :meth:`match`). Raises UnknownModelPriceError."""
        return self.match(model)[0]


def _parse_table(data: Mapping[str, Any], source: str) -> PriceTable:
    _check_keys(data, _TABLE_KEYS, f"{source}: the price table")
    families: dict[str, FamilyMultipliers] = {}
    raw_families = data.get("families", {})
    if not isinstance(raw_families, Mapping):
        raise ConfigError(f"{source}: [families] must be a table")
    for name, spec in raw_families.items():
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{source}: [families.{name}] must be a table")
        _check_keys(spec, _FAMILY_KEYS, f"{source}: [families.{name}]")
        missing = [k for k in _CACHE_KEYS if k not in spec]
        if missing:
            raise ConfigError(f"{source}: [families.{name}] is missing {', '.join(missing)}")
        where = f"{source}: families.{name}"
        families[name] = FamilyMultipliers(
            name=name,
            cache_read=_decimal(spec["cache_read"], f"{where}.cache_read"),
            cache_write_5m=_decimal(spec["cache_write_5m"], f"{where}.cache_write_5m"),
            cache_write_1h=_decimal(spec["cache_write_1h"], f"{where}.cache_write_1h"),
            source_url=str(spec.get("source_url", "")),
            checked=str(spec.get("checked", "")),
            note=str(spec.get("note", "")),
        )
    raw_models = data.get("models", {})
    if not isinstance(raw_models, Mapping):
        raise ConfigError(f"{source}: [models] must be a table")
    models = {name: _parse_row(name, spec, families, source) for name, spec in raw_models.items()}
    return PriceTable(models=models, families=families)


def _parse_row(
    name: str,
    spec: object,
    families: Mapping[str, FamilyMultipliers],
    source: str,
    where: str = "",
) -> ModelPrice:
    where = where or f'{source}: [models."{name}"]'
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a table")
    _check_keys(spec, _ROW_KEYS, where)
    missing = [k for k in ("input", "output") if k not in spec]
    if missing:
        raise ConfigError(f"{where} is missing {', '.join(missing)} (USD per million tokens)")
    family_name = str(spec.get("family", ""))
    family = families.get(family_name) or _bundled_families().get(family_name)
    if family_name and family is None:
        known = sorted({*families, *_bundled_families()})
        raise ConfigError(
            f"{where} names unknown family {family_name!r}; use one of {', '.join(known)}"
        )
    rates = {k: _decimal(spec[k], f"{where}.{k}") for k in _RATE_KEYS if k in spec}
    for key in _CACHE_KEYS:
        if key not in rates:
            if family is None:
                raise ConfigError(
                    f"{where} has no {key}: give it, or name a family (e.g. "
                    f'family = "anthropic") to derive it from the family\'s multipliers'
                )
            rates[key] = rates["input"] * getattr(family, key)
    tier = spec.get("tier_max_input_tokens")
    if tier is not None and (isinstance(tier, bool) or not isinstance(tier, int) or tier <= 0):
        raise ConfigError(f"{where}.tier_max_input_tokens must be a positive integer")
    aliases = spec.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise ConfigError(f"{where}.aliases must be a list of strings")
    above_tier = None
    raw_above = spec.get("above_tier")
    if raw_above is not None:
        if not isinstance(raw_above, Mapping):
            raise ConfigError(f"{where}.above_tier must be a table")
        if tier is None:
            raise ConfigError(f"{where}.above_tier needs tier_max_input_tokens")
        if "above_tier" in raw_above or "tier_max_input_tokens" in raw_above:
            raise ConfigError(f"{where}.above_tier cannot itself be tiered")
        inherited = {
            "family": family_name,
            "source_url": spec.get("source_url", ""),
            "checked": spec.get("checked", ""),
        }
        above_tier = _parse_row(
            f"{name} above {tier} input tokens",
            {**inherited, **raw_above},
            families,
            source,
            where=f"{where}.above_tier",
        )
    return ModelPrice(
        model=name,
        input=rates["input"],
        output=rates["output"],
        cache_read=rates["cache_read"],
        cache_write_5m=rates["cache_write_5m"],
        cache_write_1h=rates["cache_write_1h"],
        source_url=str(spec.get("source_url", "")),
        checked=str(spec.get("checked", "")),
        family=family_name,
        aliases=tuple(aliases),
        tier_max_input_tokens=tier,
        above_tier=above_tier,
        exception=str(spec.get("exception", "")),
        note=str(spec.get("note", "")),
    )


def load_price_table(path: str | Path) -> PriceTable:
    """Read a price table from a TOML file in the bundled format (see ``data/prices.toml``).

    Rows that name a bundled family (``family = "anthropic"``) may leave cache rates out; they
    are derived from the family multipliers. Combine with the bundled rows through
    ``load_price_table(p).with_fallback(default_price_table())``.

    Raises:
        ConfigError: the file is missing, is not UTF-8 text, is not valid TOML, has no
            ``[models."<name>"]`` row, or a row is malformed; the message names the file and
            the row.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(
            f"load_price_table() needs the path of a TOML file (str or Path), "
            f"got {type(path).__name__}"
        )
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ConfigError(f"cannot read price table {file}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"price table {file} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"price table {file} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "save it as UTF-8"
        ) from None
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise ConfigError(
            f"price table {file} nests arrays or inline tables too deeply to read; flatten them"
        ) from None
    table = _parse_table(data, str(file))
    if not table.models:  # families alone price nothing: rows already parsed keep their rates
        raise ConfigError(
            f'price table {file} has no rows; a row is a [models."<name>"] table, such as '
            '[models."acme-1"] with input = "2", output = "8" and family = "anthropic" '
            "(or cache_read, cache_write_5m and cache_write_1h), in USD per million tokens"
        )
    return table


@functools.cache
def _bundled_data() -> dict[str, Any]:
    text = resources.files("promptcache").joinpath("data/prices.toml").read_text("utf-8")
    return tomllib.loads(text)


@functools.cache
def _bundled_families() -> dict[str, FamilyMultipliers]:
    return dict(_parse_table({"families": _bundled_data().get("families", {})}, "").families)


@functools.cache
def default_price_table() -> PriceTable:
    """The bundled table (``promptcache/data/prices.toml``), parsed once per process."""
    return _parse_table(_bundled_data(), "promptcache/data/prices.toml")


def lookup_price(model: str, table: PriceTable | None = None) -> ModelPrice:
    """The price row for ``model`` in ``table`` (default: the bundled table).

    Raises:
        UnknownModelPriceError: no row matches; the message names close matches and how to
            pass rates.
    """
    return (table or default_price_table()).lookup(model)


def _plain(value: Decimal) -> str:
    """Exact decimal text without exponent or trailing zeros (``0.00`` -> ``0``)."""
    return format(value.normalize(), "f")


@dataclass(frozen=True)
class CostBreakdown:
    """The cost of one :class:`~promptcache.usage.Usage` at one model's rates (exact USD).

    Attributes:
        model: the model name asked for.
        price: the :class:`ModelPrice` row used.
        usage: the usage priced.
        terms: USD per :data:`COST_TERMS` entry.
        total_usd: the sum of ``terms``.
        cost_without_cache_usd: every input token at the input rate, plus output.
        savings_usd: ``cost_without_cache_usd - total_usd``; negative when cache writes were
            paid for and not yet read back.
        warnings: the usage's warnings plus pricing caveats (fallback row, tier exceeded with
            no above-tier rates known).
        above_tier: the request's input exceeded ``price.tier_max_input_tokens`` and every
            term was priced at ``price.above_tier`` (see :attr:`rates`).
    """

    model: str
    price: ModelPrice
    usage: Usage
    terms: dict[str, Decimal]
    total_usd: Decimal
    cost_without_cache_usd: Decimal
    savings_usd: Decimal
    warnings: tuple[str, ...] = ()
    above_tier: bool = False

    @property
    def rates(self) -> ModelPrice:
        """The rates the terms were priced at: ``price``, or its ``above_tier`` rates."""
        if self.above_tier and self.price.above_tier is not None:
            return self.price.above_tier
        return self.price

    @property
    def term_tokens(self) -> dict[str, int]:
        """Tokens per :data:`COST_TERMS` entry."""
        u = self.usage
        return {
            "uncached_input": u.uncached_input_tokens,
            "cache_read": u.cache_read_tokens,
            "cache_write_5m": u.cache_write_5m_tokens,
            "cache_write_1h": u.cache_write_1h_tokens,
            "cache_write_unknown": u.cache_write_unknown_tokens,
            "output": u.output_tokens,
        }

    @property
    def savings_fraction(self) -> float:
        """``savings_usd / cost_without_cache_usd`` (0.0 when nothing was spent)."""
        if not self.cost_without_cache_usd:
            return 0.0
        return float(self.savings_usd / self.cost_without_cache_usd)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; USD amounts as decimal strings so no precision is lost."""
        tokens = self.term_tokens
        return {
            "model": self.model,
            "price_row": self.price.model,
            "source_url": self.rates.source_url,
            "checked": self.rates.checked,
            "tier_max_input_tokens": self.price.tier_max_input_tokens,
            "above_tier": self.above_tier,
            "terms": {
                term: {
                    "tokens": tokens[term],
                    "rate_usd_per_mtok": _plain(self.rates.rate(term)),
                    "usd": _plain(self.terms[term]),
                }
                for term in COST_TERMS
            },
            "total_usd": _plain(self.total_usd),
            "cost_without_cache_usd": _plain(self.cost_without_cache_usd),
            "savings_usd": _plain(self.savings_usd),
            "hit_rate": self.usage.hit_rate,
            "warnings": list(self.warnings),
        }


def cost(
    usage: Usage, model: str, *, rates: ModelPrice | None = None, table: PriceTable | None = None
) -> CostBreakdown:
    """Price ``usage`` for ``model`` in exact decimal USD with a per-term breakdown.

    Args:
        usage: normalised token counts (see :mod:`promptcache.usage`).
        model: the model name as sent to or returned by the vendor; dated snapshots and Bedrock
            ids are matched as described in the module docstring.
        rates: use these rates instead of looking ``model`` up.
        table: look ``model`` up here instead of the bundled table.

    Returns:
        A :class:`CostBreakdown`.

    Raises:
        UsageParseError: ``usage`` is not a :class:`~promptcache.usage.Usage` (e.g. the vendor's
            raw usage dict: parse it first).
        ConfigError: ``model`` is not a str, ``rates`` is not a :class:`ModelPrice` or
            ``table`` not a :class:`PriceTable`.
        UnknownModelPriceError: ``rates`` is None and no row matches ``model``.
    """
    if not isinstance(usage, Usage):
        raise UsageParseError(
            f"cost() needs a promptcache.Usage, got {type(usage).__name__}; parse the vendor's "
            "usage first: Usage.from_api(api, usage_dict) or parse_usage(api, response_body)"
        )
    if rates is not None and not isinstance(rates, ModelPrice):
        raise ConfigError(
            f"cost(rates=...) needs a promptcache.ModelPrice, got {type(rates).__name__}; "
            "build one: ModelPrice(model=..., input=Decimal(...), output=..., cache_read=..., "
            "cache_write_5m=..., cache_write_1h=...) in USD per million tokens"
        )
    if table is not None and not isinstance(table, PriceTable):
        raise ConfigError(
            f"cost(table=...) needs a PriceTable, got {type(table).__name__}; read one with "
            "load_price_table(path) (the bundled format), or pass one row as rates=ModelPrice(...)"
        )
    warnings = list(usage.warnings)
    if rates is None:
        rates, fallback = (table or default_price_table()).match(model)
        if fallback:
            warnings.append(fallback)
    tokens = {
        "uncached_input": usage.uncached_input_tokens,
        "cache_read": usage.cache_read_tokens,
        "cache_write_5m": usage.cache_write_5m_tokens,
        "cache_write_1h": usage.cache_write_1h_tokens,
        "cache_write_unknown": usage.cache_write_unknown_tokens,
        "output": usage.output_tokens,
    }
    row = rates
    tier = row.tier_max_input_tokens
    above = tier is not None and usage.total_input_tokens > tier
    if above and row.above_tier is not None:
        rates = row.above_tier  # the vendor bills every token of the request at these
    elif above:
        warnings.append(
            f"{usage.total_input_tokens} input tokens exceed the {tier}-token tier of the "
            f"{row.model!r} row, which has no above_tier rates; the vendor bills a higher rate "
            "above it, so this is an underestimate"
        )
    terms = {term: tokens[term] * rates.rate(term) / _MILLION for term in COST_TERMS}
    total = sum(terms.values(), Decimal(0))
    without = (
        usage.total_input_tokens * rates.input + usage.output_tokens * rates.output
    ) / _MILLION
    return CostBreakdown(
        model=model,
        price=row,
        usage=usage,
        terms=terms,
        total_usd=total,
        cost_without_cache_usd=without,
        savings_usd=without - total,
        warnings=tuple(warnings),
        above_tier=rates is not row,
    )
