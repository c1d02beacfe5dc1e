"""Run the app with uvicorn (one process, one engine thread)."""

from __future__ import annotations

import socket

from starlette.applications import Starlette

from promptcache.client_limits import ClientLimits
from promptcache.listen import listen_socket, run_uvicorn

__all__ = ["serve"]


def serve(
    app: Starlette,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    sock: socket.socket | None = None,
    limits: ClientLimits | None = None,
) -> None:
    """Serve ``app`` until interrupted (Ctrl-C stops the engine thread cleanly).

    One uvicorn worker only: the engine, its KV pool and its prefix cache live in this process.
    ``sock``: a socket already bound to ``host:port`` (``promptcache.listen.listen_socket``, as
    ``promptcache engine serve`` binds before loading the model); None binds here.
    ``limits``: what clients may hold (head and body timeouts, keep-alive, connections;
    default ``ClientLimits()``, ``promptcache.client_limits``).

    Raises:
        ConfigError: ``host:port`` cannot be bound (``listen_socket``).
    """
    sock = sock if sock is not None else listen_socket(host, port)
    run_uvicorn(app, sock, limits=limits, host=host, port=port, log_level=log_level)
