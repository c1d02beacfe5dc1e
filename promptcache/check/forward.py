"""``promptcache check --forward``: send each captured request on to the real upstream.

The capture endpoint still records every request; the :class:`Forwarder` then replays it with
``httpx`` to the upstream and relays the answer to the child as it arrives (status, headers,
body; a streamed answer chunk by chunk, with HTTP/1.1 chunked transfer coding), so the program
runs against the real model.

Upstream of each mount, first match wins:

1. the URL the hook rerouted the request from (a client that posted to ``api.openai.com``
   directly);
2. the parent's own ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` / ``GOOGLE_GEMINI_BASE_URL``
   (a program pointed at its own gateway keeps it);
3. the vendor's public API: ``https://api.anthropic.com``, ``https://api.openai.com/v1``,
   ``https://generativelanguage.googleapis.com``.

The check's own headers (``x-promptcache-check-*``) and hop-by-hop headers are not sent on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

import httpx

from .child import HEADER_UPSTREAM

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from .capture import CapturedRequest

__all__ = ["DEFAULT_UPSTREAMS", "UPSTREAM_ENV", "Forwarder", "default_upstreams"]

#: Mount -> the vendor's public base URL (as its official client's default base URL).
DEFAULT_UPSTREAMS: Final[dict[str, str]] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
}
#: Mount -> the environment variable that names its base URL.
UPSTREAM_ENV: Final[dict[str, str]] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "gemini": "GOOGLE_GEMINI_BASE_URL",
}
_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)


def default_upstreams(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Mount -> upstream base URL: the variable in ``env`` (default ``os.environ``) where set,
    else :data:`DEFAULT_UPSTREAMS`."""
    env = os.environ if env is None else env
    return {
        mount: (env.get(UPSTREAM_ENV[mount]) or default).rstrip("/")
        for mount, default in DEFAULT_UPSTREAMS.items()
    }


def upstream_url(request: CapturedRequest, upstreams: Mapping[str, str]) -> str:
    """Where ``request`` goes: the rerouted original URL, else its mount's base URL plus the
    path (OpenAI's base URL already ends in ``/v1``, which the path also starts with)."""
    original = request.headers.get(HEADER_UPSTREAM)
    if original:
        return original
    path = request.path
    if request.vendor == "openai" and path.startswith("/v1/"):
        path = path[len("/v1") :]
    query = f"?{request.query}" if request.query else ""
    return f"{upstreams[request.vendor]}{path}{query}"


class Forwarder:
    """Replays captured requests upstream with one pooled ``httpx.Client``.

    Args:
        upstreams: mount -> base URL (default: :func:`default_upstreams`).
        timeout_s: seconds to wait for the upstream to connect or send the next bytes.
    """

    def __init__(
        self, upstreams: Mapping[str, str] | None = None, timeout_s: float = 600.0
    ) -> None:
        self.upstreams = dict(upstreams) if upstreams is not None else default_upstreams()
        self._client = httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._client.close()

    def relay(self, handler: BaseHTTPRequestHandler, request: CapturedRequest) -> int:
        """Send ``request`` upstream and write the answer to ``handler``; returns the status
        (502 in the Anthropic/OpenAI/Gemini error shape when the upstream cannot be reached),
        also set as ``request.status`` before the answer is written."""
        headers = {
            k: v
            for k, v in request.headers.items()
            if k not in _HOP_BY_HOP and not k.startswith("x-promptcache-check-")
        }
        url = upstream_url(request, self.upstreams)
        try:
            upstream = self._client.build_request(
                request.method, url, headers=headers, content=request.body or None
            )
            response = self._client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            from promptcache.proxy.vendors import error_body

            dialect = {"anthropic": "anthropic", "openai": "openai"}.get(request.vendor, "gemini")
            body = error_body(dialect, 502, f"upstream {url} unreachable: {exc}")  # type: ignore[arg-type]
            request.status = 502  # before the answer: see capture._handle
            handler.send_response(502)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return 502
        try:
            request.status = response.status_code
            handler.send_response(response.status_code)
            for name, value in response.headers.multi_items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-encoding":
                    handler.send_header(name, value)
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            for chunk in response.iter_bytes():
                if chunk:
                    handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
        finally:
            response.close()
        return response.status_code
