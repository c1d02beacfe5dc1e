"""The vendors' own cache diagnostics: read from every response, and asked for on request.

Two vendors say themselves why a request did not reuse an earlier one's cached prefix. The
proxy logs what they say beside its own explanation (``proxy/breaks.py``), and the report
counts where the two agree (``report/agreement.py``).

**Anthropic, Messages API** (https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics,
status "ga" on the page's metadata, checked 2026-12-03; the official ``anthropic`` Python SDK
2.16.0 types ``Message.diagnostics`` and ``MessageCreateParams.diagnostics`` the same way):

- request: ``"diagnostics": {"previous_message_id": "msg_..."}`` names the previous response;
  ``"previous_message_id": null`` opts in on a first turn. The API keeps a fingerprint only of
  requests that carry the ``diagnostics`` object, keyed by the response ``id``;
- response: ``diagnostics`` is ``null`` (or absent) when no divergence was found, else
  ``{"cache_miss_reason": {"type": T, "cache_missed_input_tokens": N}}`` with ``T`` one of
  ``model_changed``, ``system_changed``, ``tools_changed``, ``messages_changed`` (these four
  carry ``cache_missed_input_tokens``, an estimate of the input tokens after the divergence),
  ``previous_message_not_found`` or ``unavailable``; ``cache_miss_reason: null`` means the
  comparison was still running when the response was written. A stream carries the same
  object on ``message_start.message``. The comparison is about the request's structure, not
  about whether the cache hit. The beta of this feature wanted the header ``anthropic-beta:
  cache-diagnosis-2026-04-07``; the GA parameter needs none, and the proxy adds no header.

**OpenAI, Responses API** (https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics,
checked 2026-12-03, GPT-5.6 and later; field names and values from the official ``openai``
Python SDK 3.57.0, ``openai.types.responses.Response``):

- request: ``"prompt_cache_options": {"comparison_response_id": "resp_..."}``;
- response: ``prompt_cache_diagnostics`` is ``{"type": "cache_miss", "reason": R,
  "cache_missed_tokens": N, "comparison_reusable_tokens": M}`` with ``R`` one of
  ``model_changed``, ``prompt_cache_key_changed``, ``tools_changed``, ``text_format_changed``,
  ``reasoning_effort_changed``, ``verbosity_changed``, ``context_compacted``,
  ``input_changed``, ``service_tier_changed``; or ``{"type": "cache_hit"}``,
  ``{"type": "comparison_response_not_found"}``, ``{"type": "unavailable"}``. In a stream it
  rides on the ``response`` object of ``response.*`` events (the last one that carries it
  counts).

What the log's ``vendor_miss_reason`` holds (:func:`read_diagnosis`): the Anthropic type, or
``no_divergence`` when a request named a previous message and the response carried no
``diagnostics``, or ``pending`` when ``cache_miss_reason`` was null; the OpenAI ``reason`` of a
``cache_miss``, else its ``type``. ``vendor_cache_missed_tokens`` holds the token estimate.

``--vendor-diagnostics`` (:class:`VendorDiagnostics`) makes the proxy ask Anthropic itself:
every Messages request to an Anthropic upstream (the ``vendor`` column ``anthropic``) without a
``diagnostics`` member of its own gets one, naming the response of the request the break
explainer would compare it with (its predecessor in the same prefix family and conversation,
``BreakExplainer.predecessor_id``), or ``null`` when there is none: a conversation's first
turn, or a request that differs from its predecessor only in its last message (another
conversation on the same system prompt). The body is otherwise forwarded byte for byte
(:func:`add_previous_message_id`). OpenAI requests are never changed: ``prompt_cache_options``
exists on GPT-5.6 and later models only.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from promptcache.errors import StoreError

from .breaks import log_exists, read_log

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from promptcache.fingerprint import RequestFingerprint

    from .breaks import BreakExplainer
    from .record import RequestRecord

__all__ = [
    "ANTHROPIC_REASONS",
    "DIAGNOSABLE_APIS",
    "NO_DIVERGENCE",
    "OPENAI_REASONS",
    "PENDING",
    "VendorDiagnosis",
    "VendorDiagnostics",
    "add_previous_message_id",
    "install",
    "read_diagnosis",
    "requested_comparison",
    "response_id",
]

logger = logging.getLogger("promptcache.proxy")

#: Wire formats (``api`` column) whose responses can carry a vendor cache diagnosis.
DIAGNOSABLE_APIS: Final = frozenset({"anthropic", "openai_responses"})
#: ``vendor_miss_reason`` of an Anthropic response without ``diagnostics`` to a request that
#: named a previous message: the API found no divergence.
NO_DIVERGENCE: Final = "no_divergence"
#: ``vendor_miss_reason`` of an Anthropic response whose ``cache_miss_reason`` was null: the
#: comparison was still running when the response was written.
PENDING: Final = "pending"
#: Anthropic ``cache_miss_reason.type`` values, then the two the proxy adds.
ANTHROPIC_REASONS: Final = (
    "model_changed",
    "system_changed",
    "tools_changed",
    "messages_changed",
    "previous_message_not_found",
    "unavailable",
    NO_DIVERGENCE,
    PENDING,
)
#: OpenAI ``prompt_cache_diagnostics``: the ``reason`` values of a ``cache_miss``, then the
#: other ``type`` values.
OPENAI_REASONS: Final = (
    "model_changed",
    "prompt_cache_key_changed",
    "tools_changed",
    "text_format_changed",
    "reasoning_effort_changed",
    "verbosity_changed",
    "context_compacted",
    "input_changed",
    "service_tier_changed",
    "cache_hit",
    "comparison_response_not_found",
    "unavailable",
)


@dataclass(frozen=True, slots=True)
class VendorDiagnosis:
    """What a vendor said about one request's cache reuse.

    Attributes:
        reason: the ``vendor_miss_reason`` value (module docstring); None when the response
            carried no diagnosis and none was asked for.
        missed_tokens: the vendor's estimate of the input tokens after the divergence
            (Anthropic ``cache_missed_input_tokens``, OpenAI ``cache_missed_tokens``), or None.
    """

    reason: str | None
    missed_tokens: int | None = None


def requested_comparison(api: str | None, body: Mapping[str, Any] | None) -> str | None:
    """The earlier response id a request names for the vendor's diagnosis, or None.

    Anthropic ``diagnostics.previous_message_id`` (None also for the first turn's ``null``),
    OpenAI Responses ``prompt_cache_options.comparison_response_id``.
    """
    if body is None:
        return None
    if api == "anthropic":
        container, key = body.get("diagnostics"), "previous_message_id"
    elif api == "openai_responses":
        container, key = body.get("prompt_cache_options"), "comparison_response_id"
    else:
        return None
    value = container.get(key) if isinstance(container, Mapping) else None
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_diagnosis(
    api: str | None, payload: Mapping[str, Any], *, compared_with: str | None
) -> VendorDiagnosis | None:
    """The vendor's diagnosis in a response object, or None where it says nothing.

    Args:
        api: the route's wire format; only :data:`DIAGNOSABLE_APIS` carry one.
        payload: an Anthropic Message (a JSON body, or ``message_start``'s ``message``) or an
            OpenAI Response (a JSON body, or a stream event's ``response``).
        compared_with: the previous response id the request named (:func:`requested_comparison`)
            of an Anthropic upstream: a response without ``diagnostics`` to such a request is
            :data:`NO_DIVERGENCE` (pass None for another server that speaks the Messages API:
            it may ignore the request's ``diagnostics``).
    """
    if api == "anthropic":
        diagnostics = payload.get("diagnostics")
        if not isinstance(diagnostics, Mapping):
            return VendorDiagnosis(NO_DIVERGENCE) if compared_with is not None else None
        reason = diagnostics.get("cache_miss_reason")
        if reason is None:
            return VendorDiagnosis(PENDING)
        if isinstance(reason, Mapping) and isinstance(reason.get("type"), str):
            return VendorDiagnosis(
                str(reason["type"]), _count(reason.get("cache_missed_input_tokens"))
            )
        return None
    if api == "openai_responses":
        diagnostics = payload.get("prompt_cache_diagnostics")
        if not isinstance(diagnostics, Mapping) or not isinstance(diagnostics.get("type"), str):
            return None
        kind = str(diagnostics["type"])
        if kind == "cache_miss" and isinstance(diagnostics.get("reason"), str):
            return VendorDiagnosis(
                str(diagnostics["reason"]), _count(diagnostics.get("cache_missed_tokens"))
            )
        return VendorDiagnosis(kind)
    return None


def response_id(payload: Mapping[str, Any]) -> str | None:
    """The vendor's id of the response a body or stream event belongs to, or None.

    ``id`` of an Anthropic message, an OpenAI Response, chat completion or chunk;
    ``message.id`` of Anthropic's ``message_start``; ``response.id`` of Responses stream events.
    """
    for container in (payload.get("message"), payload.get("response"), payload):
        if type(container) is dict or (container is not None and isinstance(container, Mapping)):
            value = container.get("id")
            if isinstance(value, str) and value:
                return value
    return None


_WHITESPACE: Final = b" \t\r\n"


def add_previous_message_id(
    raw: bytes, body: Mapping[str, Any], message_id: str | None
) -> bytes | None:
    """``raw`` with ``"diagnostics":{"previous_message_id":ID}`` as its first member.

    Args:
        raw: the request body exactly as the client sent it (a UTF-8 JSON object).
        body: the same body, parsed.
        message_id: the previous response's id, or None for ``null`` (a first turn opting in).

    Returns:
        ``raw`` with the member and a comma inserted right after its opening ``{``, every other
        byte unchanged; or None when the body already has ``diagnostics`` (the client's own
        choice is kept) or does not start with ``{`` (a UTF-16 or UTF-32 body, which JSON
        allows): the request then goes out as it came.
    """
    if "diagnostics" in body:
        return None
    start = 0
    while start < len(raw) and raw[start] in _WHITESPACE:
        start += 1
    if raw[start : start + 1] != b"{":
        return None
    member = b'"diagnostics":{"previous_message_id":' + json.dumps(message_id).encode() + b"}"
    rest = raw[start + 1 :].lstrip(_WHITESPACE)
    separator = b"" if rest.startswith(b"}") else b","
    return raw[: start + 1] + member + separator + raw[start + 1 :]


class VendorDiagnostics:
    """``--vendor-diagnostics``: the previous response id to name in each Anthropic request.

    Keeps, for the most recent ``max_ids`` logged Anthropic requests, our request id -> the
    vendor's response id (filled by calling the instance as a record hook, and by :meth:`load`
    from the log on start). :meth:`previous_message_id` asks the break explainer which request
    it would compare a new one with and returns that request's response id.

    Args:
        explainer: the proxy's break explainer (``app.state.breaks``).
        max_ids: request ids remembered (LRU).
    """

    def __init__(self, explainer: BreakExplainer, *, max_ids: int = 100_000) -> None:
        self.explainer = explainer
        self.max_ids = max_ids
        self._ids: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ids)

    def previous_message_id(
        self, key_fingerprint: str | None, fingerprint: RequestFingerprint
    ) -> str | None:
        """The response id of the request ``fingerprint`` would be compared with, or None when
        the explainer knows no predecessor (a new prefix family) or its response id is unknown
        (it failed, or it is older than what is remembered)."""
        previous = self.explainer.predecessor_id(key_fingerprint, fingerprint)
        return self._ids.get(previous) if previous is not None else None

    def __call__(self, record: RequestRecord) -> None:
        """Record hook: remember a successful Anthropic request's response id."""
        if record.api == "anthropic" and record.response_id and record.status == 200:
            self._remember(record.id, record.response_id)

    def _remember(self, request_id: str, message_id: str) -> None:
        self._ids[request_id] = message_id
        self._ids.move_to_end(request_id)
        while len(self._ids) > self.max_ids:
            self._ids.popitem(last=False)

    def load(self, db_path: str | Path, *, since: float) -> int:
        """Remember the response ids of the log's successful Anthropic requests started at or
        after ``since`` (unix s), the newest ``max_ids``; returns how many are remembered.
        ``db_path`` is a SQLite file or a ``postgresql://`` URL (every proxy's rows, on a log
        several proxies share). A log that cannot be read is logged and skipped (the ids then
        come from new traffic)."""
        try:
            rows = read_log(
                db_path,
                "SELECT id, response_id FROM requests WHERE started_at >= ?"
                " AND api = 'anthropic' AND status = 200 AND response_id IS NOT NULL"
                " ORDER BY started_at DESC LIMIT ?",
                (since, self.max_ids),
            )
        except StoreError as exc:
            logger.warning("vendor diagnostics: cannot read response ids: %s", exc)
            return len(self._ids)
        for request_id, message_id in reversed(rows):
            self._remember(request_id, message_id)
        return len(self._ids)


#: How far back :func:`install` reads response ids from the log: the break explainer's own
#: window (``breaks.REBUILD_WINDOW_S``), so every predecessor it can name has its id.
REBUILD_WINDOW_S: Final = 2 * 3600.0


def install(
    app: Starlette, explainer: BreakExplainer, *, clock: Callable[[], float] | None = None
) -> VendorDiagnostics:
    """Turn on ``--vendor-diagnostics`` for ``app`` (built by ``app.build_app``).

    Reads the response ids of the last :data:`REBUILD_WINDOW_S` from the app's log (when it
    has one: a SQLite file or a ``postgresql://`` URL), appends the instance to
    ``app.state.record_hooks``, and hands it to the endpoints
    (``app.state.proxy.vendor_diagnostics``). Returns it.
    """
    diagnostics = VendorDiagnostics(explainer)
    store = getattr(app.state, "store", None)
    path = getattr(store, "path", None)
    if path is not None and log_exists(path):
        diagnostics.load(path, since=(clock or time.time)() - REBUILD_WINDOW_S)
    app.state.record_hooks.append(diagnostics)
    app.state.proxy.vendor_diagnostics = diagnostics
    return diagnostics
