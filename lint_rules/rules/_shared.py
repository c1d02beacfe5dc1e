"""Helpers shared by several rule modules (not a rule: the registry skips ``_`` modules)."""

from __future__ import annotations

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
