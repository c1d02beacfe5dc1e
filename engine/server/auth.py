"""Optional bearer-token check for the ``/v1`` routes (``serve --api-key``).

The official clients send ``Authorization: Bearer <api_key>``; with a key configured, a request
to ``/v1/...`` without the right one gets OpenAI's 401 body. ``/health`` and ``/metrics`` stay
open (probes and scrapers). Plain ASGI middleware, so streaming responses pass through untouched.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from promptcache.errors import ConfigError
from promptcache.hosts import is_loopback_host

__all__ = ["BearerAuth", "check_bind"]


class BearerAuth:
    """Reject ``/v1`` requests whose ``Authorization`` header is not ``Bearer <api_key>``."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1"):
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": {
                    "message": "Incorrect API key provided: send the server's --api-key as "
                    "'Authorization: Bearer <key>' (the client's api_key).",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        ).encode()
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
        await send({"type": "http.response.body", "body": body})


def check_bind(host: str, api_key: str | None, insecure_no_auth: bool) -> None:
    """Refuse to serve beyond this machine without an API key (or an explicit opt-out).

    Raises:
        ConfigError: ``host`` is not a loopback address, no ``api_key`` is given and
            ``insecure_no_auth`` is false.
    """
    if api_key or insecure_no_auth or is_loopback_host(host):
        return
    raise ConfigError(
        f"--host {host} would let any machine that reaches it use this model; pass --api-key "
        "KEY (clients send it as their api_key) or --insecure-no-auth on a trusted network"
    )
