"""Bind the listening socket first, then serve: shared by ``promptcache proxy`` and
``promptcache engine serve``.

Binding before anything slow happens (loading a model, opening the log) makes the usual start-up
mistake, a port already in use, a one-line error at once instead of a uvicorn log line after
the banner (and, for the engine, after the model has loaded).
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
from typing import Any

from .errors import ConfigError

__all__ = ["STARTUP_FAILURE", "listen_socket", "run_uvicorn"]

#: Exit status when the server could not start (uvicorn's own ``STARTUP_FAILURE``).
STARTUP_FAILURE = 3

_REASONS = {
    errno.EADDRINUSE: "the address is already in use (another server?): stop it or pick another "
    "--port",
    errno.EADDRNOTAVAIL: "this machine has no such address: use 127.0.0.1 or one of its own "
    "addresses",
    errno.EACCES: "permission denied (ports below 1024 need privileges): pick a port above 1023",
}


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` for uvicorn, set up as uvicorn binds its own
    (``SO_REUSEADDR``, IPv6 when ``host`` holds a colon, inheritable).

    Raises:
        ConfigError: the address is in use, not one of this machine's, needs privileges, or
            ``host`` does not resolve; the message says what to change.
    """
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        if isinstance(exc, socket.gaierror):
            reason = f"unknown host ({exc.strerror}): use an IP address or a name this machine "
            reason += "resolves"
        else:
            reason = _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        raise ConfigError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


def run_uvicorn(app: Any, sock: socket.socket, **settings: Any) -> None:
    """Serve ``app`` on the bound ``sock`` with one uvicorn worker until interrupted, as
    ``uvicorn.run`` would (``settings`` are ``uvicorn.Config`` options). Exits with
    ``STARTUP_FAILURE`` if the app's start-up failed (uvicorn has logged why).

    Access-log lines (``access_log=True``) quote the request's path and query string: credentials
    in them (Gemini's ``?key=``...) are masked by ``proxy.redact.RedactFilter``."""
    import uvicorn

    from .proxy.redact import RedactFilter

    config = uvicorn.Config(app, **settings)  # configures uvicorn's loggers
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactFilter) for f in access.filters):
        access.addFilter(RedactFilter())
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown, as uvicorn.run
        pass
    finally:
        sock.close()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
