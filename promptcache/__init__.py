"""promptcache: make LLM prompt caching work and pay off.

The public SDK is re-exported here; see docs/sdk.md. Subpackages: ``promptcache.lint_rules``
(the linter), ``promptcache.proxy`` (logging proxy), ``promptcache.engine`` (inference engine),
``promptcache.kernels`` (Triton kernels).

The SDK's names are loaded on first use (PEP 562), so a subpackage (the engine, the proxy)
imports none of the SDK's modules it does not use: about 4 MiB of RSS in the engine's process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptcache.lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from promptcache.canonical import canonical_json, canonical_tool_schema, normalize_text
    from promptcache.conversation import Conversation
    from promptcache.fingerprint import (
        Breakpoint,
        Divergence,
        RequestFingerprint,
        Segment,
        fingerprint_request,
        first_divergence,
    )
    from promptcache.guard import PrefixGuard
    from promptcache.minimums import ModelMinimums, default_model_minimums, load_model_minimums
    from promptcache.pricing import (
        CostBreakdown,
        ModelPrice,
        PriceTable,
        cost,
        default_price_table,
        load_price_table,
        lookup_price,
    )
    from promptcache.prompt import PromptBuilder, RenderedRequest, ToolSpec, Turn
    from promptcache.tokens import count_tokens
    from promptcache.ttl import TTLAdvice, TTLOption, advise_ttl
    from promptcache.usage import (
        Usage,
        UsageAccumulator,
        detect_api,
        parse_usage,
        stream_accumulator,
    )

__all__ = [
    "Breakpoint",
    "Conversation",
    "CostBreakdown",
    "Divergence",
    "ModelMinimums",
    "ModelPrice",
    "PrefixGuard",
    "PriceTable",
    "PromptBuilder",
    "RenderedRequest",
    "RequestFingerprint",
    "Segment",
    "TTLAdvice",
    "TTLOption",
    "ToolSpec",
    "Turn",
    "Usage",
    "UsageAccumulator",
    "__version__",
    "advise_ttl",
    "canonical_json",
    "canonical_tool_schema",
    "cost",
    "count_tokens",
    "default_model_minimums",
    "default_price_table",
    "detect_api",
    "fingerprint_request",
    "first_divergence",
    "load_model_minimums",
    "load_price_table",
    "lookup_price",
    "normalize_text",
    "parse_usage",
    "stream_accumulator",
]

_WHERE = {
    "Breakpoint": ".fingerprint",
    "Conversation": ".conversation",
    "CostBreakdown": ".pricing",
    "Divergence": ".fingerprint",
    "ModelMinimums": ".minimums",
    "ModelPrice": ".pricing",
    "PrefixGuard": ".guard",
    "PriceTable": ".pricing",
    "PromptBuilder": ".prompt",
    "RenderedRequest": ".prompt",
    "RequestFingerprint": ".fingerprint",
    "Segment": ".fingerprint",
    "TTLAdvice": ".ttl",
    "TTLOption": ".ttl",
    "ToolSpec": ".prompt",
    "Turn": ".prompt",
    "Usage": ".usage",
    "UsageAccumulator": ".usage",
    "advise_ttl": ".ttl",
    "canonical_json": ".canonical",
    "canonical_tool_schema": ".canonical",
    "cost": ".pricing",
    "count_tokens": ".tokens",
    "default_model_minimums": ".minimums",
    "default_price_table": ".pricing",
    "detect_api": ".usage",
    "fingerprint_request": ".fingerprint",
    "first_divergence": ".fingerprint",
    "load_model_minimums": ".minimums",
    "load_price_table": ".pricing",
    "lookup_price": ".pricing",
    "normalize_text": ".canonical",
    "parse_usage": ".usage",
    "stream_accumulator": ".usage",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
