"""Pure-ASGI middleware of the proxy (no ``BaseHTTPMiddleware`` in the hot path).

``AuthMiddleware`` guards a proxy that listens beyond loopback: every HTTP request must carry the
proxy's token in ``x-promptcache-auth`` (compared in constant time); the header is removed again
before forwarding (``forward.request_headers``), so vendors never see it. ``/healthz`` stays open
for load balancers. A missing or wrong token gets 401 in the vendor shape of the route, and the
request is neither forwarded nor recorded.

The live report's paths (``/report``, ``/report.json``: :mod:`.report.live`) and ``/metrics``
also accept the token as the password of HTTP Basic auth (RFC 7617; any user name), since a
browser cannot add a custom header to a page load, and a Prometheus scrape job sends Basic auth
(``basic_auth``) where it may send no other header; their 401 carries ``WWW-Authenticate:
Basic`` so the browser asks for it.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from .config import AUTH_HEADER
from .vendors import Dialect, dialect_for_path, error_body

__all__ = ["AuthMiddleware"]

#: Paths served without the token.
OPEN_PATHS = frozenset({"/healthz"})
#: Paths where the token may also come as the password of HTTP Basic auth (the live report,
#: and the metrics a Prometheus scrape job reads with ``basic_auth``).
BASIC_AUTH_PATHS = frozenset({"/report", "/report.json", "/metrics"})
_BASIC_CHALLENGE = b'Basic realm="promptcache report", charset="UTF-8"'


def _basic_password(value: bytes) -> bytes:
    """The password of an ``Authorization: Basic`` header value (b"" if it is not one)."""
    scheme, _, encoded = value.partition(b" ")
    if scheme.lower() != b"basic":
        return b""
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return b""
    return decoded.partition(b":")[2]


class AuthMiddleware:
    """Reject HTTP requests that lack the proxy's auth token.

    Args:
        app: the wrapped ASGI app.
        token: the secret clients must send in ``AUTH_HEADER``.
        default_dialect: error shape for paths that belong to no vendor route.
    """

    def __init__(self, app: ASGIApp, token: str, default_dialect: Dialect) -> None:
        self.app = app
        self._token = token.encode()
        self._header = AUTH_HEADER.encode()
        self._default_dialect = default_dialect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        basic = scope["path"] in BASIC_AUTH_PATHS
        supplied = b""
        for name, value in scope["headers"]:
            if name == self._header:
                supplied = value
                break
            if basic and name == b"authorization" and not supplied:
                supplied = _basic_password(value)
        if hmac.compare_digest(supplied, self._token):
            await self.app(scope, receive, send)
            return
        dialect = dialect_for_path(scope["path"], self._default_dialect)
        reason = "wrong" if supplied else "missing"
        body = error_body(
            dialect,
            401,
            f"the promptcache proxy's auth token is {reason}: send it in the {AUTH_HEADER} header"
            + (" or as the HTTP Basic auth password" if basic else ""),
        )
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *([(b"www-authenticate", _BASIC_CHALLENGE)] if basic else []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})
