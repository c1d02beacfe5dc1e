"""Bind the listening socket first, then serve: shared by ``promptcache proxy`` and
``promptcache engine serve``.

Binding before anything slow happens (loading a model, opening the log) makes the usual start-up
mistake, a port already in use, a one-line error at once instead of a uvicorn log line after
the banner (and, for the engine, after the model has loaded).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .client_limits import (
    ClientLimits,
    default_max_connections,
    protocol_class,
    raise_open_files_limit,
)
from .errors import ConfigError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "SHUTDOWN_STATUS",
    "STARTUP_FAILURE",
    "ReportCancelled",
    "listen_socket",
    "log_to_stderr",
    "run_uvicorn",
]

#: Exit status when the server could not start (uvicorn's own ``STARTUP_FAILURE``).
STARTUP_FAILURE = 3
#: Pending connections the listening socket queues (uvicorn's default ``backlog``).
BACKLOG = 2048

_REASONS = {
    errno.EADDRINUSE: "the address is already in use (another server?): stop it or pick another "
    "--port",
    errno.EADDRNOTAVAIL: "this machine has no such address: use 127.0.0.1 or one of its own "
    "addresses",
    errno.EACCES: "permission denied (ports below 1024 need privileges): pick a port above 1023",
}


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` for uvicorn, set up as uvicorn binds its own
    (``SO_REUSEADDR``, IPv6 when ``host`` holds a colon, inheritable), and already listening.

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
    # Listening at once: a client that connects while the model loads or the log opens waits in
    # the backlog (uvicorn's default size) instead of being refused, and the proxy's start-up
    # check of an engine that is still loading finds it there.
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def log_to_stderr(level: str | int) -> None:
    """Print the ``promptcache`` loggers' records (the proxy's, the engine's) to stderr at
    ``level``, formatted as uvicorn's own lines (``WARNING:  message``)."""
    from uvicorn.logging import DefaultFormatter

    root = logging.getLogger("promptcache")
    if not any(getattr(h, "promptcache_server", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s"))
        handler.promptcache_server = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)


logger = logging.getLogger("promptcache.server")


#: The answer to a request the server cancels at shutdown before it answered: a 503 in the
#: error shape every vendor client reads a message from (``client_limits``), not uvicorn's plain
#: ``500 Internal Server Error``, which reads as a server bug.
SHUTDOWN_STATUS = 503
_SHUTDOWN_BODY = json.dumps(
    {
        "type": "error",
        "error": {
            "type": "overloaded_error",
            "message": "the server stopped before it answered this request (it is shutting "
            "down); send the request again once the server is back, or to another one",
        },
    }
).encode()


class ReportCancelled:
    """ASGI wrapper: a request cancelled while the server stops (uvicorn cancels what is still
    running when ``timeout_graceful_shutdown`` runs out, or at a second Ctrl-C) is logged as one
    warning line naming it, instead of uvicorn's "Exception in ASGI application" traceback of the
    ``CancelledError`` (:class:`_NoCancelledTraceback` drops that record). One whose response had
    not started is answered :data:`SHUTDOWN_STATUS` with a JSON error, the connection closed; a
    started one is cut (uvicorn closes its connection). The cancellation still propagates."""

    def __init__(self, app: ASGIApp, grace_s: float | None) -> None:
        self.app = app
        self.grace_s = grace_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started: list[int] = []

        def watch(message: Any) -> Awaitable[None]:
            # Hands back the server's own awaitable: no coroutine of its own for each body
            # message (a relayed stream sends one per upstream read).
            if message["type"] == "http.response.start":
                started.append(int(message["status"]))
            return send(message)

        try:
            await self.app(scope, receive, watch)
        except asyncio.CancelledError:
            client = scope.get("client")
            peer = f" from {client[0]}:{client[1]}" if client else ""
            grace = f" after the {self.grace_s:g} s grace" if self.grace_s is not None else ""
            if started:
                sent = f"status {started[0]} sent, body cut"
            else:
                sent = f"no response had started: answered {SHUTDOWN_STATUS}"
                with contextlib.suppress(Exception):  # a client already gone: nothing to tell
                    await _answer_shutdown(send)
            logger.warning(
                "request %s %s%s cancelled at shutdown%s (%s)",
                scope.get("method", "?"),
                scope.get("path", "?"),
                peer,
                grace,
                sent,
            )
            raise


async def _answer_shutdown(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": SHUTDOWN_STATUS,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_SHUTDOWN_BODY)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _SHUTDOWN_BODY, "more_body": False})


class _NoCancelledTraceback(logging.Filter):
    """Drops uvicorn's error record of a request task that ended in ``CancelledError`` (already
    reported in one line by :class:`ReportCancelled`), and the traceback text Starlette's
    lifespan sends when a second Ctrl-C (uvicorn's force quit) cancels it while it waits for the
    shutdown message (``lifespan.shutdown.failed``, logged by uvicorn as a plain message)."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        if info and info[0] is not None and issubclass(info[0], asyncio.CancelledError):
            return False
        message = record.msg
        return not (
            isinstance(message, str)
            and message.startswith("Traceback (most recent call last):")
            and message.rstrip().endswith("CancelledError")
        )


def run_uvicorn(
    app: Any,
    sock: socket.socket,
    *,
    limits: ClientLimits | None = None,
    fds_per_connection: int = 1,
    **settings: Any,
) -> None:
    """Serve ``app`` on the bound ``sock`` with one uvicorn worker until interrupted, as
    ``uvicorn.run`` would (``settings`` are ``uvicorn.Config`` options). Exits with
    ``STARTUP_FAILURE`` if the app's start-up failed (uvicorn has logged why).

    ``limits`` (default ``ClientLimits()``) bound what clients may hold: head and body
    timeouts, idle keep-alive, open connections (``client_limits.protocol_class``). The
    process's open-files limit is raised to its hard limit first; the default connection limit
    leaves room in it for ``fds_per_connection`` descriptors per client connection.

    Access-log lines (``access_log=True``) quote the request's path and query string: credentials
    in them (Gemini's ``?key=``...) are masked by ``proxy.redact.RedactFilter``."""
    import uvicorn

    from .proxy.redact import RedactFilter

    limits = limits if limits is not None else ClientLimits()
    open_files = raise_open_files_limit()
    max_connections = limits.max_connections or default_max_connections(
        open_files, fds_per_connection
    )
    settings["http"] = protocol_class(limits, max_connections)
    settings["timeout_keep_alive"] = limits.keep_alive_s
    settings["h11_max_incomplete_event_size"] = limits.max_head_bytes
    grace = settings.get("timeout_graceful_shutdown")
    config = uvicorn.Config(ReportCancelled(app, grace), **settings)  # configures its loggers
    log_to_stderr(settings.get("log_level", "info"))
    errors = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _NoCancelledTraceback) for f in errors.filters):
        errors.addFilter(_NoCancelledTraceback())
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
