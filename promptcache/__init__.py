"""promptcache: make LLM prompt caching work and pay off.

The public SDK is re-exported here; see docs/sdk.md. Subpackages: ``promptcache.lint_rules``
(the linter), ``promptcache.proxy`` (logging proxy), ``promptcache.engine`` (inference engine),
``promptcache.kernels`` (Triton kernels).
"""

from __future__ import annotations

__version__ = "0.1.0"

from promptcache.pricing import (
    CostBreakdown,
    ModelPrice,
    PriceTable,
    cost,
    default_price_table,
    load_price_table,
    lookup_price,
)
from promptcache.ttl import TTLAdvice, TTLOption, advise_ttl
from promptcache.usage import Usage, UsageAccumulator, detect_api, parse_usage, stream_accumulator

__all__ = [
    "CostBreakdown",
    "ModelPrice",
    "PriceTable",
    "TTLAdvice",
    "TTLOption",
    "Usage",
    "UsageAccumulator",
    "__version__",
    "advise_ttl",
    "cost",
    "default_price_table",
    "detect_api",
    "load_price_table",
    "lookup_price",
    "parse_usage",
    "stream_accumulator",
]
