"""The report's agreement table: our cache-break reason beside the vendor's own diagnosis.

Anthropic and OpenAI can say themselves where a request's prompt diverged from an earlier
response's (``proxy/diagnostics.py``; the proxy logs it in ``vendor_miss_reason``). For every
request of the window that carries such a diagnosis, this module sets the explainer's
``break_reason`` (``proxy/breaks.py``; NULL when the request kept its cached prefix) against it
and counts each pair, with a verdict:

- both name the same part of the prompt: **agree**;
- they name different parts, or one sees a change and the other none: **disagree**;
- either side has nothing to compare: **inconclusive** (our ``new_prefix``: no predecessor;
  the vendor's ``previous_message_not_found``, ``comparison_response_not_found``,
  ``unavailable`` or ``pending``).

The parts (:data:`OUR_PARTS`, :data:`VENDOR_PARTS`): ``model``; ``system``; ``tools``
(``tools_reordered`` included, and OpenAI's ``text_format_changed``: the fingerprint counts
``text.format`` among the tools, ``promptcache/segments.py``); ``messages`` (our
``history_rewritten`` and ``anchor_changed`` included); and ``unchanged``, the prompt's
structure is the same: no break on our side, or a break the vendors do not diagnose
(``ttl_expired``, ``lookback_exceeded``, ``breakpoint_moved``, ``below_minimum``,
``breakpoint_missing``: the vendors compare the requests' structure, not whether the cache was
read), and the vendor's ``no_divergence`` or ``cache_hit``. OpenAI's ``input_changed`` covers
both ``system`` and ``messages`` (it names no separate reason for ``instructions`` or
developer messages); its changes of settings our explainer does not fingerprint
(``prompt_cache_key_changed``, ``reasoning_effort_changed``, ``verbosity_changed``,
``service_tier_changed``, ``context_compacted``) agree with none.

The two sides may have compared different requests: ours is the predecessor the explainer
chose (``previous_request_id``), the vendor's the response the request named
(``vendor_comparison_id``). ``same_previous`` counts the requests where that response is our
predecessor's (``response_id``): with ``--vendor-diagnostics`` the proxy names it itself, so
most are; a client that names its own may name another.

Disagreements are listed with examples: the newest :data:`EXAMPLES_PER_PAIR` request ids of
each disagreeing pair, with both predecessors. The SQL is plain (a ``LEFT JOIN`` on the primary
key and ``CASE``), the same on SQLite and Postgres, and reads only the rows with a diagnosis
(the partial index ``idx_requests_vendor_diagnosis``, schema step 10).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from .window import Window

__all__ = [
    "EXAMPLES_PER_PAIR",
    "OUR_PARTS",
    "VENDOR_PARTS",
    "Agreement",
    "AgreementExample",
    "AgreementRow",
    "agreement",
    "verdict",
]

#: Example requests listed per disagreeing pair of reasons.
EXAMPLES_PER_PAIR: Final = 3

#: The part of the prompt each of our reasons names (None: no break; absent: inconclusive).
OUR_PARTS: Final[dict[str | None, str]] = {
    None: "unchanged",
    "model_changed": "model",
    "system_changed": "system",
    "tools_changed": "tools",
    "tools_reordered": "tools",
    "messages_changed": "messages",
    "history_rewritten": "messages",
    "anchor_changed": "messages",
    "ttl_expired": "unchanged",
    "lookback_exceeded": "unchanged",
    "breakpoint_moved": "unchanged",
    "below_minimum": "unchanged",
    "breakpoint_missing": "unchanged",
}

#: The parts each vendor reason agrees with, by wire format (absent: inconclusive).
VENDOR_PARTS: Final[dict[str, dict[str, frozenset[str]]]] = {
    "anthropic": {
        "model_changed": frozenset({"model"}),
        "system_changed": frozenset({"system"}),
        "tools_changed": frozenset({"tools"}),
        "messages_changed": frozenset({"messages"}),
        "no_divergence": frozenset({"unchanged"}),
    },
    "openai_responses": {
        "model_changed": frozenset({"model"}),
        "tools_changed": frozenset({"tools"}),
        "text_format_changed": frozenset({"tools"}),
        "input_changed": frozenset({"system", "messages"}),
        "cache_hit": frozenset({"unchanged"}),
        "prompt_cache_key_changed": frozenset(),
        "reasoning_effort_changed": frozenset(),
        "verbosity_changed": frozenset(),
        "service_tier_changed": frozenset(),
        "context_compacted": frozenset(),
    },
}


def verdict(api: str | None, ours: str | None, vendor: str) -> str:
    """``agree``, ``disagree`` or ``inconclusive`` for our ``break_reason`` ``ours`` (None: no
    break) against the vendor's ``vendor_miss_reason`` on wire format ``api``."""
    part = OUR_PARTS.get(ours)
    parts = VENDOR_PARTS.get(api or "", {}).get(vendor)
    if part is None or parts is None:
        return "inconclusive"
    return "agree" if part in parts else "disagree"


@dataclass(frozen=True)
class AgreementRow:
    """The requests of one (wire format, our reason, vendor reason) pair.

    Attributes:
        api: the ``api`` column (``anthropic``, ``openai_responses``).
        ours: our ``break_reason``; None when the request kept its cached prefix.
        vendor: the ``vendor_miss_reason``.
        requests: how many requests.
        same_previous: of those, how many the vendor compared with our predecessor's response.
        verdict: :func:`verdict` of the pair.
    """

    api: str
    ours: str | None
    vendor: str
    requests: int
    same_previous: int
    verdict: str


@dataclass(frozen=True)
class AgreementExample:
    """One request where the two disagree: its id, both reasons, and what each compared with
    (our ``previous_request_id``; the vendor response id the request named)."""

    request_id: str
    api: str
    ours: str | None
    vendor: str
    previous_request_id: str | None
    vendor_comparison_id: str | None


@dataclass(frozen=True)
class Agreement:
    """The agreement table of a report window; the counts are requests with a diagnosis.

    ``requests == agree + disagree + inconclusive``; ``rows`` are sorted by requests, most
    first; ``examples`` follow the order of the disagreeing rows.
    """

    requests: int
    agree: int
    disagree: int
    inconclusive: int
    same_previous: int
    rows: tuple[AgreementRow, ...]
    examples: tuple[AgreementExample, ...]


_PAIRS: Final = """
SELECT r.api, r.break_reason, r.vendor_miss_reason, COUNT(*),
       SUM(CASE WHEN p.response_id IS NOT NULL AND p.response_id = r.vendor_comparison_id
                THEN 1 ELSE 0 END)
FROM requests AS r LEFT JOIN requests AS p ON p.id = r.previous_request_id
WHERE r.vendor_miss_reason IS NOT NULL AND r.started_at >= ? AND r.started_at < ?
GROUP BY r.api, r.break_reason, r.vendor_miss_reason
"""


def agreement(conn: sqlite3.Connection, w: Window) -> Agreement | None:
    """The agreement table of ``w``; None when no request of it carries a vendor diagnosis.

    Raises:
        sqlite3.Error: the log cannot be read.
    """
    rows = [
        AgreementRow(api or "", ours, vendor, count, same, verdict(api, ours, vendor))
        for api, ours, vendor, count, same in conn.execute(_PAIRS, (w.since, w.until))
    ]
    if not rows:
        return None
    rows.sort(key=lambda r: (-r.requests, r.api, r.ours or "", r.vendor))
    examples = []
    for row in rows:
        if row.verdict == "disagree":
            examples += _examples(conn, w, row)
    total = {name: sum(r.requests for r in rows if r.verdict == name) for name in
             ("agree", "disagree", "inconclusive")}  # fmt: skip
    return Agreement(
        requests=sum(r.requests for r in rows),
        agree=total["agree"],
        disagree=total["disagree"],
        inconclusive=total["inconclusive"],
        same_previous=sum(r.same_previous for r in rows),
        rows=tuple(rows),
        examples=tuple(examples),
    )


def _examples(conn: sqlite3.Connection, w: Window, row: AgreementRow) -> list[AgreementExample]:
    ours = "break_reason IS NULL" if row.ours is None else "break_reason = ?"
    params: list[object] = [row.vendor, row.api, *([] if row.ours is None else [row.ours])]
    found = conn.execute(
        "SELECT id, previous_request_id, vendor_comparison_id FROM requests"
        f" WHERE vendor_miss_reason = ? AND api = ? AND {ours}"
        " AND started_at >= ? AND started_at < ? ORDER BY started_at DESC, id DESC LIMIT ?",
        (*params, w.since, w.until, EXAMPLES_PER_PAIR),
    )
    return [
        AgreementExample(rid, row.api, row.ours, row.vendor, previous, compared)
        for rid, previous, compared in found
    ]
