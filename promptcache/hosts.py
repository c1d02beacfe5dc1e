"""Host checks shared by the proxy and the engine server: whether a host stays on this machine
(they refuse to listen beyond it without a token) and whether it names anything at all."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import SplitResult

from .errors import ConfigError

__all__ = ["check_host", "check_url_port", "http_url", "is_loopback_host"]


def http_url(host: str, port: int) -> str:
    """``http://HOST:PORT``, with an IPv6 literal in brackets (RFC 3986: ``http://[::1]:8787``)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def check_url_port(parts: SplitResult, named: str, example: str) -> None:
    """Refuse a URL whose port is 0, above 65535 or not a number (``urlsplit`` accepts such a
    URL; only reading its ``.port`` fails, or gives 0). A URL with no port passes.

    Args:
        parts: the URL, split.
        named: how the message names the URL, e.g. ``"upstream URL 'http://***@host:99999'"``
            (with its ``user:password@`` already masked).
        example: a URL with a valid port for the message to suggest.

    Raises:
        ConfigError: the port is invalid; the message says what to give instead.
    """
    try:
        port = parts.port
    except ValueError:  # out of range, or not a number
        port = 0
    if port == 0:
        raise ConfigError(
            f"{named} has an invalid port; give a port from 1 to 65535 (e.g. {example}) or none "
            "for the scheme's default"
        )


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``); False for any
    other name or address, including names that might resolve to loopback (no DNS lookup)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str) -> None:
    """Refuse a ``--host`` that is neither an address nor a name this machine resolves (checked
    before the token check: a typo is not a security problem, so it gets its own message).

    Raises:
        ConfigError: ``host`` does not resolve; the message says what to give instead.
    """
    if is_loopback_host(host):
        return
    try:
        socket.getaddrinfo(host.strip("[]"), None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError) as exc:  # gaierror; an over-long label; a NUL
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"--host {host!r} is an unknown host ({reason}); use an IP address (127.0.0.1, "
            "0.0.0.0, one of this machine's) or a name this machine resolves"
        ) from None
