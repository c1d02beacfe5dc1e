"""Run the proxy under uvicorn (what ``promptcache proxy`` calls)."""

from __future__ import annotations

import sys

from promptcache.listen import listen_socket, run_uvicorn

from .app import build_app
from .config import ProxyConfig, check_bind

__all__ = ["serve"]


def serve(
    config: ProxyConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    insecure_no_auth: bool = False,
    log_level: str = "info",
    access_log: bool = False,
    banner: str | None = None,
) -> None:
    """Serve ``config`` on ``host:port`` until interrupted; a clean stop writes every row.

    uvicorn's own ``server`` and ``date`` headers are off, so the upstream's pass through alone.
    uvicorn picks its C HTTP parser (``httptools``) and event loop (``uvloop``) when they are
    installed (the ``proxy`` extra installs both); they cut the proxy's CPU per request by
    0.05-0.25 ms (``benchmarks/proxy_overhead.py --http h11 --loop asyncio`` against the
    defaults, 2 shared cores, 2026-11-30). Without them it runs on h11 and asyncio, slower.
    ``banner`` is printed to stderr once the address is bound and the log open, so a failure to
    start is the only line printed.

    Raises:
        ConfigError: a non-loopback ``host`` without ``config.auth_token`` or ``insecure_no_auth``,
            or an address that cannot be bound (in use, not this machine's...).
        StoreError: the log file cannot be opened.
    """
    check_bind(host, config.auth_token, insecure_no_auth)
    sock = listen_socket(host, port)  # before the log opens: a port in use fails in one line
    try:
        app = build_app(config)
    except BaseException:
        sock.close()
        raise
    if banner is not None:
        print(banner, file=sys.stderr, flush=True)
    run_uvicorn(
        app,
        sock,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=30,
    )
