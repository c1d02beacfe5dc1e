"""Fill a ``RequestRecord`` from the request and response bodies, through the SDK.

Runs after the response has gone out, so none of it adds to the client's latency:

- ``describe_prompt``: per-segment and chained prefix hashes, breakpoints and approximate prefix
  tokens (``promptcache.fingerprint``);
- ``apply_usage``: the normalised usage buckets (``promptcache.usage``), our cost and the cost
  without cache (``promptcache.pricing``) and a vendor-reported cost.

The vendors' own cache diagnoses are read by ``proxy/diagnostics.py``.

Nothing here raises on odd vendor data: the record keeps what could be read, and the reason
the rest could not is logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from promptcache.errors import PromptCacheError, UnknownModelPriceError
from promptcache.fingerprint import RequestFingerprint, Segment, fingerprint_request
from promptcache.pricing import cost, default_price_table
from promptcache.usage import Usage

from .record import RequestRecord

__all__ = ["apply_usage", "describe_prompt", "response_model", "segment_hashes_json", "warm_up"]

logger = logging.getLogger("promptcache.proxy")


def describe_prompt(
    record: RequestRecord,
    body: Mapping[str, Any],
    api: str,
    fingerprint: RequestFingerprint | None = None,
) -> None:
    """Set the prefix columns (``segment_hashes``, ``prefix_hash``...) and ``record.fingerprint``.

    ``fingerprint`` is ``body``'s, when already computed (for routing); else it is computed
    here. A body the SDK cannot split (wrong container types, NaN) leaves them NULL, logged at
    INFO: the vendor will usually reject such a request too.
    """
    if fingerprint is None:
        try:
            fingerprint = fingerprint_request(body, api)
        except PromptCacheError as exc:
            logger.info("request %s: no prefix fingerprint: %s", record.id, exc)
            return
    record.fingerprint = fingerprint
    record.segment_hashes = segment_hashes_json(fingerprint.segments)
    record.prefix_hash = fingerprint.prefix_hash
    record.first_segment_hash = fingerprint.segments[0].sha256 if fingerprint.segments else None
    record.approx_prefix_tokens = fingerprint.approx_prefix_tokens
    breakpoints = fingerprint.breakpoints
    record.breakpoints = (  # most requests mark none: json.dumps([]) without the encoder
        json.dumps([{"path": b.path, "ttl": b.ttl} for b in breakpoints]) if breakpoints else "[]"
    )


def segment_hashes_json(segments: Sequence[Segment]) -> str:
    """The ``segment_hashes`` column: ``json.dumps`` of a list with one object per segment
    (``path``, ``kind``, ``sha256``, ``num_chars``, ``num_tokens``), the same text.

    A list's ``json.dumps`` is its items' ``json.dumps`` joined by ``", "`` in brackets, and
    the segments a conversation repeats on every turn (its system prompt, its earlier turns)
    have the same five values each time: their items' text is kept by those values
    (``_SEGMENT_ITEMS``) instead of serialised again for every request.
    """
    items = _SEGMENT_ITEMS
    parts = []
    for s in segments:
        key = (s.path, s.kind, s.sha256, s.num_chars, s.num_tokens)
        item = items.get(key)
        if item is None:
            item = json.dumps(
                {
                    "path": s.path,
                    "kind": s.kind,
                    "sha256": s.sha256,
                    "num_chars": s.num_chars,
                    "num_tokens": s.num_tokens,
                }
            )
            if len(items) >= _SEGMENT_ITEMS_MAX:
                items.clear()
            items[key] = item
        parts.append(item)
    return "[" + ", ".join(parts) + "]"


#: ``segment_hashes_json``'s item texts by their five values; emptied when it holds
#: ``_SEGMENT_ITEMS_MAX`` (about 300 bytes an entry: 20 MB at most).
_SEGMENT_ITEMS: dict[tuple[str, str, str, int, int | None], str] = {}
_SEGMENT_ITEMS_MAX = 65_536


def apply_usage(record: RequestRecord, usage: Usage, price_as: str | None = None) -> None:
    """Set the usage and cost columns from ``usage`` priced at ``record.model``.

    A model without a price row is priced at ``price_as``'s rates (the upstream's ``price_as``
    setting, already checked against the price table) and ``record.priced_as`` names it; with
    no ``price_as`` its cost columns stay NULL (never a silent 0).
    """
    record.set_usage_columns(usage)
    vendor_cost = usage.raw.get("cost")  # OpenRouter-style usage.cost, in USD
    if isinstance(vendor_cost, (int, float, str)) and not isinstance(vendor_cost, bool):
        with contextlib.suppress(InvalidOperation):
            record.vendor_cost_usd = str(Decimal(str(vendor_cost)))
    if record.model is None:
        return
    try:
        breakdown = cost(usage, record.model)
    except UnknownModelPriceError:
        if price_as is None:
            return
        breakdown = cost(usage, price_as)
        record.priced_as = price_as
    record.cost = breakdown
    record.cost_usd = str(breakdown.total_usd)
    record.cost_without_cache_usd = str(breakdown.cost_without_cache_usd)


def response_model(payload: Mapping[str, Any]) -> str | None:
    """The model a response body or stream event names, or None if it names none.

    ``model`` on an Anthropic message, an OpenAI chat/completions object or chunk and a
    Responses object; ``message.model`` on Anthropic's ``message_start``; ``response.model`` on
    Responses stream events; ``modelVersion`` on Gemini responses and chunks.
    """
    for container in (payload, payload.get("message"), payload.get("response")):
        if type(container) is dict or (container is not None and isinstance(container, Mapping)):
            for key in ("model", "modelVersion"):
                value = container.get(key)
                if isinstance(value, str) and value:
                    return value
    return None


def warm_up() -> None:
    """Load the tokenizer (``approx_prefix_tokens``) and the price table now.

    Both load on first use and take about a second of CPU together; called once at startup so
    the first request does not stall the event loop for every other request in flight.
    """
    fingerprint_request({"messages": [{"role": "user", "content": "warm up"}]}, "openai_chat")
    default_price_table()
