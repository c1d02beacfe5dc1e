"""Checks and small pieces the vendor renderers share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from promptcache.breakpoints import BreakpointPlan, PlannedBreakpoint
from promptcache.errors import ConfigError
from promptcache.lookback import SlidingWindow
from promptcache.minimums import default_model_minimums
from promptcache.prompt_types import RenderedRequest
from promptcache.tokens import count_tokens

if TYPE_CHECKING:
    from promptcache.prompt import PromptBuilder

_LAYER_ORDER = {"tools": 0, "system": 1, "messages": 2}
#: The vendors of the bundled minimum table (``data/model_minimums.toml``), lower case.
_CLOUD_VENDORS = frozenset({"anthropic", "bedrock", "openai", "gemini"})


def require_model(builder: PromptBuilder, renderer: str) -> str:
    """The builder's model id.

    Raises:
        ConfigError: no model was set.
    """
    if not builder.model:
        raise ConfigError(f"{renderer}() needs a model: PromptBuilder(model=...)")
    return builder.model


def require_content(builder: PromptBuilder, renderer: str) -> None:
    """Raise ``ConfigError`` when there is neither history nor dynamic content to send."""
    if not builder.history and not builder.dynamic_blocks:
        raise ConfigError(
            f"{renderer}(): nothing to answer: add a dynamic() question or a history message"
        )


def positive_int(value: object, name: str) -> int:
    """``value`` if it is an int >= 1, else ``ConfigError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}")
    return value


def automatic_cache_warnings(builder: PromptBuilder, vendor: str) -> list[str]:
    """Warn when the whole prompt is below the model's minimum for automatic caching.

    OpenAI and Gemini cache automatically from a minimum prompt length on (1024 tokens for
    OpenAI, https://developers.openai.com/api/docs/guides/prompt-caching ; 2048-4096 for Gemini,
    https://ai.google.dev/gemini-api/docs/caching ; checked 2026-11-30). ``vendor`` is the API
    rendered for (``"OpenAI"``, ``"Gemini"``): the minimum and its source are that vendor's. The
    builder's model row is used unless it belongs to another of the :data:`_CLOUD_VENDORS` (a
    Claude id rendered for OpenAI's API): then the rendered vendor's smallest minimum is used,
    since that API applies its own rule whatever the model is called. Rows of self-hosted or
    user-defined models apply as they are. Models missing from the table get no
    warning: OpenAI-compatible servers use arbitrary model names, and Google documents no
    minimum for Gemini 2.5 Flash-Lite (its ``gemini-2.5-flash-lite*`` ids have no row;
    https://ai.google.dev/gemini-api/docs/caching , checked 2026-12-06).
    """
    total = sum(builder.approx_tokens().values())
    if builder.min_prefix_tokens is not None:
        minimum, source = builder.min_prefix_tokens, "min_prefix_tokens"
    else:
        table = builder.minimums or default_model_minimums()
        row = table.lookup(builder.model) if builder.model else None
        if row is None:
            return []
        if row.vendor.lower() in _CLOUD_VENDORS and row.vendor.lower() != vendor.lower():
            own = [r for r in table.rows if r.vendor.lower() == vendor.lower()]
            if not own:
                return []
            row = min(own, key=lambda r: r.min_tokens)
        minimum, source = row.min_tokens, row.describe()
    if total >= minimum:
        return []
    return [
        f"the whole prompt is about {total} tokens, below the {vendor} minimum of {source}; "
        "nothing will be cached"
    ]


def retention_param(retention: str | None) -> dict[str, str]:
    """``{"prompt_cache_retention": ...}`` for OpenAI, or ``{}``.

    Raises:
        ConfigError: a value other than ``"in_memory"`` or ``"24h"``
            (https://developers.openai.com/api/docs/guides/prompt-caching , checked 2026-11-30).
    """
    if retention is None:
        return {}
    if retention not in ("in_memory", "24h"):
        raise ConfigError(f"retention must be 'in_memory' or '24h', got {retention!r}")
    return {"prompt_cache_retention": retention}


def cache_key_param(builder: PromptBuilder, include: bool, renderer: str) -> dict[str, str]:
    """``{"prompt_cache_key": builder.cache_key}`` when ``include``, else ``{}``.

    Raises:
        ConfigError: ``include`` is True but the builder has no ``cache_key``. promptcache never
            invents one: a random key per request spreads requests over cache shards.
    """
    if not include:
        return {}
    if builder.cache_key is None:
        raise ConfigError(
            f"{renderer}() was asked for a prompt_cache_key but the builder has none: pass a "
            "stable tenant or conversation id as PromptBuilder(cache_key=...), or call "
            f"{renderer}(include_cache_key=False)"
        )
    return {"prompt_cache_key": builder.cache_key}


def within_lookback(
    builder: PromptBuilder,
    params: dict[str, Any],
    api: Literal["anthropic", "bedrock_converse"],
    plan: BreakpointPlan,
) -> RenderedRequest:
    """The rendered request, kept within Anthropic's lookback window (``promptcache.lookback``).

    The builder remembers, per vendor, where its previous render wrote last; when the history
    has grown more than ``SLIDE_AFTER_POSITIONS`` block positions past it, a ``"sliding"``
    breakpoint is added on the history message that still reads that write (dropping the tools
    breakpoint if a fifth would be needed; frozen and session ones are kept). Each render is
    taken as sent.
    """
    window = builder._windows.setdefault(api, SlidingWindow())
    history_ttl = builder.ttls["history"]
    note = window.apply(params, api, ttl=history_ttl)
    kept = list(plan.kept)
    warnings = list(plan.warnings)
    if note.path is None or note.message_index is None:
        if note.why:
            warnings.append(note.why)
        return RenderedRequest(params, warnings, kept)
    if note.dropped is not None:
        layer = "tools" if "tools[" in note.dropped else "messages"
        gone = next(bp for bp in kept if bp.layer == layer)
        kept.remove(gone)
        warnings.append(
            f"dropped the {gone.where} breakpoint to make room for a sliding one (at most 4)"
        )
    m = note.message_index
    tokens = builder.approx_tokens()
    prefix = tokens["tools"] + tokens["frozen"] + tokens["session"]
    prefix += sum(count_tokens(turn.text) for turn in builder.history[: m + 1])
    kept.append(PlannedBreakpoint("sliding", "messages", m, history_ttl, prefix, note.why))
    kept.sort(key=lambda bp: (_LAYER_ORDER[bp.layer], bp.index))
    return RenderedRequest(params, warnings, kept)
