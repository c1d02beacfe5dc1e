"""Host checks shared by the proxy and the engine server: whether a host stays on this machine
(they refuse to listen beyond it without a token) and whether it names anything at all."""

from __future__ import annotations

import ipaddress
import socket

from .errors import ConfigError

__all__ = ["check_host", "http_url", "is_loopback_host"]


def http_url(host: str, port: int) -> str:
    """``http://HOST:PORT``, with an IPv6 literal in brackets (RFC 3986: ``http://[::1]:8787``)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


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
