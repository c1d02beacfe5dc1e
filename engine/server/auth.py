"""Optional bearer-token check for the ``/v1`` routes (``serve --api-key``).

The official clients send ``Authorization: Bearer <api_key>``; with a key configured, a request
to ``/v1/...`` without the right one gets OpenAI's 401 body (OpenAI's missing-key wording when
no ``Authorization`` header is sent). ``/health`` and ``/metrics`` stay open (probes and
scrapers). Plain ASGI middleware, so streaming responses pass through untouched.

The header is parsed as RFC 7235 / RFC 6750 say: the scheme ``Bearer`` in any letter case, one
or more spaces, then the token. A key must be something a client can send in that header
(``validate_api_key``), so an empty or whitespace-only token can never match.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from promptcache.errors import ConfigError
from promptcache.hosts import is_loopback_host

__all__ = ["BearerAuth", "bearer_token", "check_bind", "validate_api_key"]


def validate_api_key(api_key: str) -> str:
    """Check that ``api_key`` is a key clients can send as ``Authorization: Bearer <key>``.

    A key must be non-empty printable ASCII without leading or trailing whitespace: HTTP strips
    the whitespace around a header value, so such a key could never match, and a blank key would
    protect nothing. The error message never repeats the key.

    Returns:
        ``api_key`` unchanged.

    Raises:
        ConfigError: the key is empty, whitespace only, has leading/trailing whitespace, or holds
            a character outside printable ASCII.
    """
    if not isinstance(api_key, str):
        raise ConfigError(f"--api-key must be a string, got {type(api_key).__name__}")
    if not api_key.strip():
        raise ConfigError(
            "--api-key must not be empty or whitespace only: pass a real key (for example the "
            "output of `openssl rand -hex 32`), or leave --api-key out on a loopback host"
        )
    if api_key != api_key.strip():
        raise ConfigError(
            "--api-key must not start or end with whitespace: HTTP drops it from the "
            "Authorization header, so no client could send this key; remove the whitespace"
        )
    bad = next((i for i, ch in enumerate(api_key) if not " " <= ch <= "~"), None)
    if bad is not None:
        raise ConfigError(
            f"--api-key may hold only printable ASCII characters, but character {bad} is not; "
            "HTTP clients cannot send it in the Authorization header"
        )
    return api_key


def bearer_token(authorization: bytes) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or None.

    The scheme is case-insensitive and may be followed by several spaces or tabs (RFC 7235
    section 2.1); surrounding whitespace is ignored. None when the scheme is not ``Bearer`` or
    the token is empty.
    """
    parts = authorization.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != b"bearer":
        return None
    token = parts[1].strip()
    return token or None


_MISSING_KEY_ERROR: dict[str, str | None] = {
    "message": "You didn't provide an API key. You need to provide the server's --api-key in an "
    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY; the "
    "client's api_key).",
    "type": "invalid_request_error",
    "param": None,
    "code": None,
}
"""The 401 ``error`` object for a ``/v1`` request with no ``Authorization`` header: OpenAI's
wording and codes for a request that sends no key (``code`` null)."""

_INCORRECT_KEY_ERROR: dict[str, str | None] = {
    "message": "Incorrect API key provided: send the server's --api-key as "
    "'Authorization: Bearer <key>' (the client's api_key).",
    "type": "invalid_request_error",
    "param": None,
    "code": "invalid_api_key",
}
"""The 401 ``error`` object for a ``/v1`` request whose ``Authorization`` header does not carry
the key (another key, another scheme, an empty token)."""


class BearerAuth:
    """Reject ``/v1`` requests whose ``Authorization`` header is not ``Bearer <api_key>``: a
    401 with `_MISSING_KEY_ERROR` when the header is absent, else `_INCORRECT_KEY_ERROR`.

    Raises:
        ConfigError: at construction, an ``api_key`` that ``validate_api_key`` refuses.
    """

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._expected = validate_api_key(api_key).encode("ascii")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1"):
            await self.app(scope, receive, send)
            return
        authorization = dict(scope["headers"]).get(b"authorization")
        token = bearer_token(authorization) if authorization is not None else None
        if token is not None and hmac.compare_digest(token, self._expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {"error": _MISSING_KEY_ERROR if authorization is None else _INCORRECT_KEY_ERROR}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),  # RFC 7235: a 401 names the scheme
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def check_bind(host: str, api_key: str | None, insecure_no_auth: bool) -> None:
    """Refuse to serve beyond this machine without an API key (or an explicit opt-out), and
    refuse an API key no client could send (``validate_api_key``).

    Raises:
        ConfigError: ``api_key`` is given but invalid (empty, whitespace only...), or ``host`` is
            not a loopback address, no ``api_key`` is given and ``insecure_no_auth`` is false.
    """
    if api_key is not None:
        validate_api_key(api_key)
    if api_key or insecure_no_auth or is_loopback_host(host):
        return
    raise ConfigError(
        f"--host {host} would let any machine that reaches it use this model; pass --api-key "
        "KEY (clients send it as their api_key) or --insecure-no-auth on a trusted network"
    )
