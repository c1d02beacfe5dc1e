"""Run the proxy under uvicorn (what ``promptcache proxy`` calls)."""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from promptcache.client_limits import ClientLimits
from promptcache.listen import listen_socket, log_to_stderr, run_uvicorn

from .app import build_app
from .config import ProxyConfig, UpstreamConfig, check_bind

__all__ = ["CHECK_TIMEOUT_S", "serve", "unreachable_upstreams"]

logger = logging.getLogger("promptcache.proxy")

#: Seconds the start-up check gives each upstream to accept a TCP connection.
CHECK_TIMEOUT_S = 3.0


def _targets(config: ProxyConfig) -> list[UpstreamConfig]:
    """Every server the proxy forwards to: each upstream a request can reach (the default and
    the routes' targets; a built-in that no route names gets none), or each of its replicas."""
    targets: dict[str, UpstreamConfig] = {}
    routed = dict.fromkeys([config.default_upstream, *(rule.upstream for rule in config.rules)])
    for upstream in (config.upstreams[name] for name in routed):
        for url in upstream.replicas or (upstream.url,):
            targets.setdefault(url, dataclasses.replace(upstream, url=url))
    return list(targets.values())


def _connect_error(upstream: UpstreamConfig, timeout_s: float) -> str | None:
    """Why a TCP connection to ``upstream``'s host and port failed, or None when it opened."""
    parts = urlsplit(upstream.url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            return None
    except socket.gaierror as exc:
        return f"its host does not resolve ({exc.strerror})"
    except TimeoutError:
        return f"no connection within {timeout_s:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def unreachable_upstreams(
    config: ProxyConfig, timeout_s: float = CHECK_TIMEOUT_S
) -> list[tuple[UpstreamConfig, str]]:
    """The upstreams (replicas one by one) that do not accept a TCP connection, each with the
    reason, checked at once (one connection each, closed at once; no HTTP request)."""
    targets = _targets(config)
    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        reasons = list(pool.map(lambda u: _connect_error(u, timeout_s), targets))
    return [(u, why) for u, why in zip(targets, reasons, strict=True) if why is not None]


def _warn_unreachable(config: ProxyConfig) -> None:
    for upstream, why in unreachable_upstreams(config):
        hint = ""
        if upstream.vendor == "engine":  # the bundled engine's address: say how to start one
            port = urlsplit(upstream.url).port or 80
            hint = f" (start it: promptcache engine serve --model PATH --port {port})"
        logger.warning(
            "upstream %s is not reachable (%s); requests to it get 502 until it is%s",
            upstream.described,
            why,
            hint,
        )


def serve(
    config: ProxyConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    insecure_no_auth: bool = False,
    log_level: str = "info",
    access_log: bool = False,
    banner: str | None = None,
    graceful_shutdown_s: float = 30.0,
    limits: ClientLimits | None = None,
) -> None:
    """Serve ``config`` on ``host:port`` until interrupted; a clean stop writes every row.

    uvicorn's own ``server`` and ``date`` headers are off, so the upstream's pass through alone.
    uvicorn picks its C HTTP parser (``httptools``) and event loop (``uvloop``) when they are
    installed (the ``proxy`` extra installs both); they cut the proxy's CPU per request by
    0.05-0.25 ms (``benchmarks/proxy_overhead.py --http h11 --loop asyncio`` against the
    defaults, 2 shared cores, 2026-11-30). Without them it runs on h11 and asyncio, slower.
    ``banner`` is printed to stderr once the address is bound and the log open, so a failure to
    start is the only line printed. Then each upstream gets a TCP connection attempt
    (``unreachable_upstreams``, in a background thread while the server starts): one that does
    not accept it is logged as a warning, and the proxy serves all the same. A stop waits
    ``graceful_shutdown_s`` seconds for the requests still running, then cancels them, one log
    line each (``listen.ReportCancelled``). ``limits``: what clients may hold (head and body
    timeouts, keep-alive, connections; default ``ClientLimits()``); the default connection limit
    counts two descriptors per client connection, its own and its upstream one.

    Raises:
        ConfigError: a non-loopback ``host`` without ``config.auth_token`` or ``insecure_no_auth``,
            or an address that cannot be bound (in use, not this machine's...).
        StoreError: the log file cannot be opened.
    """
    check_bind(host, config.auth_token, insecure_no_auth)
    sock = listen_socket(host, port)  # before the log opens: a port in use fails in one line
    try:
        app = build_app(config, tune_gc=True)
    except BaseException:
        sock.close()
        raise
    if banner is not None:
        print(banner, file=sys.stderr, flush=True)
    log_to_stderr(log_level)
    threading.Thread(target=_warn_unreachable, args=(config,), daemon=True).start()
    run_uvicorn(
        app,
        sock,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=graceful_shutdown_s,
        limits=limits,
        fds_per_connection=2,
    )
