"""Cache breakpoint planning for Anthropic ``cache_control`` and Bedrock ``cachePoint`` markers.

``plan_breakpoints`` takes the breakpoints a prompt asks for, in prefix order (tools -> system ->
messages), and enforces the vendor rules (checked 2026-11-30 against
https://platform.claude.com/docs/en/build-with-claude/prompt-caching and
https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html):

* at most 4 breakpoints per request; asking for more raises ``BreakpointLimitError`` (the API
  would answer 400 "A maximum of 4 blocks with cache_control may be provided");
* ``ttl`` is ``"5m"`` or ``"1h"``, and a 1h breakpoint may not follow a 5m one (else 400):
  ``BreakpointTTLOrderError`` names both and the fix. The order is checked on the breakpoints
  kept after the minimum below (a skipped one is never sent). promptcache raises rather than
  reorders, because silently promoting a 5m breakpoint to 1h doubles its write price (1.25x -> 2x);
* a breakpoint whose cumulative prefix is below the model's minimum cacheable length would write
  nothing: it is dropped and a warning saying so is returned, never silently. Minimums come from
  ``promptcache.minimums``; token counts are ``cl100k_base`` approximations. A model whose row
  belongs to another vendor's API (``gpt-4o`` rendered for Anthropic) is checked against the
  smallest minimum of the rendered API's own rows instead, with a warning naming both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from promptcache.errors import BreakpointLimitError, BreakpointTTLOrderError, ConfigError
from promptcache.minimums import ModelMinimums, default_model_minimums

__all__ = [
    "AUTO_LOCATIONS",
    "MAX_BREAKPOINTS",
    "BreakpointPlan",
    "Layer",
    "PlannedBreakpoint",
    "Ttl",
    "check_ttl",
    "plan_breakpoints",
]

Ttl = Literal["5m", "1h"]
Layer = Literal["tools", "system", "messages"]

#: Where ``PromptBuilder`` places breakpoints automatically, in prefix order: after the last tool,
#: after the last frozen system block, after the last session block, on the newest history message.
AUTO_LOCATIONS: tuple[str, ...] = ("tools", "frozen", "session", "history")
#: Why each kind of breakpoint is placed (``PlannedBreakpoint.why``).
WHY: dict[str, str] = {
    "tools": "after the last tool definition: the tools stay cached if the system changes",
    "frozen": "end of the frozen layer, shared by every request",
    "session": "end of the session layer, shared by this user's or task's requests",
    "history": "newest history message: the next turn reads everything up to here",
    "marker": "placed by cache_breakpoint()",
}
#: Anthropic and Bedrock accept at most this many breakpoints per request.
MAX_BREAKPOINTS = 4
#: The minimum table's vendors (``MinimumRow.vendor``) whose models each API serves.
_SERVED_BY: dict[str, frozenset[str]] = {
    "anthropic": frozenset({"anthropic"}),
    "bedrock": frozenset({"anthropic", "bedrock"}),
}
#: Cloud vendors of the bundled table; a row of another label (a user's own) applies anywhere.
_CLOUD_VENDORS = frozenset({"anthropic", "bedrock", "openai", "gemini"})
_API_NAME = {"anthropic": "Anthropic", "bedrock": "Bedrock"}
#: ``MinimumRow.vendor`` -> the words for its models ("an OpenAI model").
_A_VENDOR = {
    "anthropic": "an Anthropic",
    "bedrock": "a Bedrock",
    "openai": "an OpenAI",
    "gemini": "a Gemini",
}


def check_ttl(value: object, where: str) -> Ttl:
    """Return ``value`` if it is ``"5m"`` or ``"1h"``.

    Raises:
        ConfigError: any other value; the message names ``where``.
    """
    if value == "5m":
        return "5m"
    if value == "1h":
        return "1h"
    raise ConfigError(f"{where}: ttl must be '5m' or '1h', got {value!r}")


@dataclass(frozen=True)
class PlannedBreakpoint:
    """A breakpoint at one block of the rendered request.

    Attributes:
        label: ``"tools"``, ``"frozen"``, ``"session"``, ``"history"``, ``"marker"`` (placed by
            ``PromptBuilder.cache_breakpoint``) or ``"sliding"`` (kept within Anthropic's
            lookback window, ``promptcache.lookback``).
        layer: ``"tools"``, ``"system"`` or ``"messages"``: which request list holds the block.
        index: index of the marked tool, system block or message in the builder's order: in
            that list for Anthropic; Bedrock's own ``cachePoint`` blocks, which the rendered
            lists hold after each marked block, are not counted (the session block of a
            request whose frozen layer ends in a cachePoint is ``system[2]`` here, the third
            text block, and ``system[3]`` in the request and in ``promptcache hash``).
        ttl: ``"5m"`` or ``"1h"``.
        prefix_tokens: approximate cumulative prefix, in tokens, up to and including the block.
        why: why it is there, one sentence (the rendered plan, ``RenderedRequest.plan``).
            ``"sliding"`` breakpoints (``promptcache.lookback``) say how far the history grew.
    """

    label: str
    layer: Layer
    index: int
    ttl: Ttl
    prefix_tokens: int
    why: str = ""

    @property
    def where(self) -> str:
        """``"system[1] (frozen)"``: for messages."""
        return f"{self.layer}[{self.index}] ({self.label})"


@dataclass(frozen=True)
class BreakpointPlan:
    """The breakpoints to render and the warnings about the ones dropped.

    Attributes:
        kept: breakpoints to render, in prefix order.
        warnings: one sentence per dropped breakpoint or unchecked minimum.
        min_tokens: the minimum applied, or None when unknown for the model.
    """

    kept: tuple[PlannedBreakpoint, ...]
    warnings: tuple[str, ...]
    min_tokens: int | None


def plan_breakpoints(
    requested: Sequence[PlannedBreakpoint],
    *,
    model: str,
    vendor: Literal["anthropic", "bedrock"],
    minimums: ModelMinimums | None = None,
    min_prefix_tokens: int | None = None,
) -> BreakpointPlan:
    """Check the requested breakpoints against the vendor rules; drop the ones too short.

    Args:
        requested: breakpoints in prefix order (tools, then system, then messages).
        model: the model id; selects the minimum from ``minimums``.
        vendor: ``"anthropic"`` or ``"bedrock"`` (Bedrock models may not cache tools).
        minimums: the table to use; the bundled one when None.
        min_prefix_tokens: use this minimum (tokens) instead of the table's.

    Returns:
        A ``BreakpointPlan``. Its warnings say so when ``model``'s row is another cloud vendor's
        (OpenAI, Gemini; Amazon Nova for ``"anthropic"``): that row's minimum is then replaced
        by the smallest of the rendered API's own rows (below it no model there caches).

    Raises:
        BreakpointLimitError: more than ``MAX_BREAKPOINTS`` requested.
        BreakpointTTLOrderError: a kept 1h breakpoint after a kept 5m one (skipped ones,
            never sent, do not count).
    """
    if len(requested) > MAX_BREAKPOINTS:
        listed = ", ".join(bp.where for bp in requested)
        raise BreakpointLimitError(
            f"{len(requested)} cache breakpoints requested ({listed}); the vendor accepts at most "
            f"{MAX_BREAKPOINTS}: drop a cache_breakpoint() marker or leave a location out of "
            "PromptBuilder(breakpoints=...)"
        )
    table = minimums or default_model_minimums()
    row = table.lookup(model)
    warnings: list[str] = []
    own_vendors = _SERVED_BY[vendor]
    if row is not None and row.vendor.lower() in _CLOUD_VENDORS - own_vendors:
        # another cloud vendor's model (gpt-4o sent to the Messages API): its row's minimum is
        # not this API's rule; the smallest of this API's own rows is (below it, no model here
        # caches), as automatic_cache_warnings does for the OpenAI and Gemini renderings
        own = [r for r in table.rows if r.vendor.lower() in own_vendors]
        api = _API_NAME[vendor]
        if min_prefix_tokens is not None:
            checked = f"breakpoints were checked against min_prefix_tokens ({min_prefix_tokens})"
        elif own:
            smallest = min(own, key=lambda r: r.min_tokens).describe()
            checked = f"breakpoints were checked against the smallest {api} minimum, {smallest}"
        else:
            checked = f"the table has no {api} row, so its minimum was not applied"
        warnings.append(
            f"model {model!r} is {_A_VENDOR[row.vendor.lower()]} model "
            f"({row.name}), not one of the {api} API's, whose caching rules differ: {checked}"
        )
        row = min(own, key=lambda r: r.min_tokens) if own else None
    if min_prefix_tokens is not None:
        minimum: int | None = min_prefix_tokens
        source = f"{min_prefix_tokens} tokens (min_prefix_tokens)"
    elif row is not None:
        minimum, source = row.min_tokens, row.describe()
    else:
        minimum, source = None, ""
        warnings.append(
            f"no minimum cacheable prefix is known for model {model!r}: breakpoints were not "
            "checked against one; add a row to model_minimums.toml or pass min_prefix_tokens"
        )
    kept: list[PlannedBreakpoint] = []
    for bp in requested:
        if vendor == "bedrock" and bp.layer == "tools" and row is not None and not row.tool_caching:
            warnings.append(
                f"skipped cache breakpoint at {bp.where}: {row.name} cannot cache tool "
                f"definitions ({row.source_url}, checked {row.checked})"
            )
        elif minimum is not None and bp.prefix_tokens < minimum:
            warnings.append(
                f"skipped cache breakpoint at {bp.where}: cumulative prefix is about "
                f"{bp.prefix_tokens} token{'' if bp.prefix_tokens == 1 else 's'}, below the "
                f"minimum of {source} for {model}; "
                "nothing would be cached there"
            )
        else:
            kept.append(bp)
    # Only the breakpoints actually sent can break the order: a skipped 5m one is never seen.
    last_5m: PlannedBreakpoint | None = None
    for i, bp in enumerate(kept):
        if bp.ttl == "5m" and last_5m is None:
            last_5m = bp
        elif bp.ttl == "1h" and last_5m is not None:
            # every 5m breakpoint before this one must become 1h, not only the first
            labels = list(dict.fromkeys(k.label for k in kept[:i] if k.ttl == "5m"))
            raise BreakpointTTLOrderError(
                f"breakpoint {bp.where} has ttl '1h' but comes after {last_5m.where} with ttl "
                "'5m'; longer TTLs must come first in the prefix (the API answers 400): set "
                f"{' and '.join(map(repr, labels))} to '1h' too, or {bp.label!r} to '5m'"
            )
    return BreakpointPlan(tuple(kept), tuple(warnings), minimum)
