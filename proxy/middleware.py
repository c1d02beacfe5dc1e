"""Pure-ASGI middleware of the proxy (no ``BaseHTTPMiddleware`` in the hot path).

``AuthMiddleware`` guards a proxy that listens beyond loopback: every HTTP request must carry the
proxy's token in ``x-promptcache-auth`` (compared in constant time); the header is removed again
before forwarding (``forward.request_headers``), so vendors never see it. ``/healthz`` stays open
for load balancers. A missing or wrong token gets 401 in the vendor shape of the route, and the
request is neither forwarded nor recorded.
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from .config import AUTH_HEADER
from .vendors import Dialect, dialect_for_path, error_body

__all__ = ["AuthMiddleware"]

#: Paths served without the token.
OPEN_PATHS = frozenset({"/healthz"})


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
        supplied = b""
        for name, value in scope["headers"]:
            if name == self._header:
                supplied = value
                break
        if hmac.compare_digest(supplied, self._token):
            await self.app(scope, receive, send)
            return
        dialect = dialect_for_path(scope["path"], self._default_dialect)
        reason = "wrong" if supplied else "missing"
        body = error_body(
            dialect,
            401,
            f"the promptcache proxy's auth token is {reason}: send it in the {AUTH_HEADER} header",
        )
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})
