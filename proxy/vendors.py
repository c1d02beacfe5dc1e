"""The vendor routes the proxy serves, and each vendor's own error body shape.

A client talks to the proxy in one vendor's dialect (the route tells which), so every error the
proxy produces itself (malformed JSON, body too large, upstream unreachable, unknown route) is
written in that dialect's shape and the official SDKs raise their usual exception types.

Error shapes (checked 2026-11-30):

- Anthropic, https://platform.claude.com/docs/en/api/errors :
  ``{"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}``.
- OpenAI, https://platform.openai.com/docs/guides/error-codes :
  ``{"error": {"message": "...", "type": "invalid_request_error", "param": null, "code": null}}``.
- Gemini (Google API errors), https://ai.google.dev/gemini-api/docs/troubleshooting :
  ``{"error": {"code": 400, "message": "...", "status": "INVALID_ARGUMENT"}}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["anthropic", "openai", "gemini"]


@dataclass(frozen=True)
class RouteSpec:
    """One route the proxy forwards.

    Attributes:
        path: starlette path pattern, e.g. ``/v1/messages`` or ``/v1beta/models/{target}``.
        methods: HTTP methods accepted on it.
        dialect: whose error shape a client of this route expects.
        api: the wire format of the body, as the SDK names it (``anthropic``, ``openai_chat``,
            ``openai_responses``, ``openai_completions``, ``gemini``); ``None`` for routes that
            carry no prompt (``GET /v1/models``, ``GET /v1/models/{model}``).
        records_usage: whether the response carries token usage worth parsing.
        json_body: whether the request must carry a JSON object body.
    """

    path: str
    methods: tuple[str, ...]
    dialect: Dialect
    api: str | None
    records_usage: bool
    json_body: bool


#: Every route served, in the order they are matched.
ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec("/v1/messages", ("POST",), "anthropic", "anthropic", True, True),
    RouteSpec("/v1/messages/count_tokens", ("POST",), "anthropic", "anthropic", False, True),
    RouteSpec("/v1/chat/completions", ("POST",), "openai", "openai_chat", True, True),
    RouteSpec("/v1/responses", ("POST",), "openai", "openai_responses", True, True),
    RouteSpec("/v1/completions", ("POST",), "openai", "openai_completions", True, True),
    RouteSpec("/v1/models", ("GET",), "openai", None, False, False),
    # One model's card (``client.models.retrieve``); ``path``: served names may hold a slash
    # (``local/tiny``), which the openai client sends as %2F and the server decodes.
    RouteSpec("/v1/models/{model:path}", ("GET",), "openai", None, False, False),
    RouteSpec("/v1beta/models/{target}", ("POST",), "gemini", "gemini", True, True),
)

#: The Gemini methods accepted after the model name, e.g. ``gemini-2.5-flash:generateContent``.
GEMINI_ACTIONS = ("generateContent", "streamGenerateContent", "countTokens")

#: Human-readable list of what is served, used in 404 messages and the docs.
SUPPORTED_ROUTES: tuple[str, ...] = (
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "POST /v1/chat/completions",
    "POST /v1/responses",
    "POST /v1/completions",
    "GET /v1/models",
    "GET /v1/models/{model}",
    "POST /v1beta/models/{model}:generateContent",
    "POST /v1beta/models/{model}:streamGenerateContent?alt=sse",
    "POST /v1beta/models/{model}:countTokens",
)

#: What the proxy answers itself, never forwarded (metrics, liveness, the live report): named
#: after the vendor routes in the 404 of a path nothing serves, so a mistyped ``/metric`` or
#: ``/reports`` finds the right one.
OWN_ROUTES: tuple[str, ...] = ("GET /metrics", "GET /healthz", "GET /report", "GET /report.json")

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def dialect_for_path(path: str, default: Dialect) -> Dialect:
    """The dialect a client of ``path`` speaks; ``default`` for paths no vendor route matches."""
    if path.startswith("/v1beta/"):
        return "gemini"
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith(("/v1/chat/", "/v1/responses", "/v1/completions", "/v1/models")):
        return "openai"
    return default


def error_body(dialect: Dialect, status: int, message: str) -> bytes:
    """The JSON bytes of an error in ``dialect``'s own shape.

    Args:
        dialect: whose shape to use.
        status: the HTTP status the error is sent with (picks the vendor's error type).
        message: what went wrong and what to change.

    Returns:
        UTF-8 JSON bytes, ready to send with ``content-type: application/json``.
    """
    body: dict[str, object]
    if dialect == "anthropic":
        kind = _ANTHROPIC_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif dialect == "openai":
        kind = _OPENAI_TYPES.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    else:
        state = _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        body = {"error": {"code": status, "message": message, "status": state}}
    return json.dumps(body, ensure_ascii=False).encode()


def error_message_of(body: bytes) -> str | None:
    """The human message inside a vendor-shaped error body, or ``None`` if there is none.

    Used to record why an upstream answered 4xx/5xx. Accepts all three shapes above (and a
    Gemini error list, which some Google endpoints return).
    """
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    if isinstance(parsed, list) and parsed:
        parsed = parsed[0]
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return None
