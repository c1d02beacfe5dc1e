"""Helpers shared by several rule modules (not a rule: the registry skips ``_`` modules)."""

from __future__ import annotations

from ..facts import Fact, Kind

#: APIs with explicit cache breakpoints (``cache_control`` blocks or Bedrock ``cachePoint``)
BREAKPOINT_APIS = frozenset(
    {"anthropic", "bedrock", "bedrock.invoke", "litellm", "custom.anthropic", "custom.bedrock"}
)
#: APIs that take an OpenAI ``prompt_cache_key``
CACHE_KEY_APIS = frozenset(
    {"openai.chat", "openai.responses", "litellm", "custom.openai", "promptcache"}
)
#: a static part this long (characters, about 512 tokens) is worth caching on its own
LONG_STATIC_CHARS = 2048


def how_often(fact: Fact) -> str:
    """How often the text of a time or unique value changes, as PC001 grades a time: "once a
    day" for a date, "more than once a day" for a finer time, "on every request" for an id."""
    if fact.kind is Kind.TIME:
        return "once a day" if fact.granularity == "day" else "more than once a day"
    return "on every request"
