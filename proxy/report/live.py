"""The live report on the proxy: ``GET /report`` (the HTML page) and ``GET /report.json``.

``/report.json?window=W`` is exactly ``promptcache report --format json --since W`` of the
proxy's own log; ``/report?window=W`` is the HTML page of the same window with a window
selector (:data:`WINDOWS`) and a script that polls ``/report.json`` every few seconds and, when
its numbers change, fetches ``/report?part=main`` (the page body alone) and swaps it in. Both
are answered by the proxy itself, never forwarded upstream, and read the log read-only in a
worker thread (rows reach the log within the writer's flush interval).

Building a report reads the whole window, which on a large log takes a worker thread for a long
while; :class:`ReportCache` keeps the built report of each window and answers every request from
it: one build at a time per window (the requests that arrive meanwhile wait for it), at most
``max_builds`` builds at once in all, and a window is rebuilt only when the log has new rows
(SQLite's ``PRAGMA data_version``) and its report is at least ``refresh_s`` old, or when it is
``max_age_s`` old (so old rows leave the window).

Auth: with an auth token set, :class:`.middleware.AuthMiddleware` guards these paths like
every other; a browser, which cannot add the ``x-promptcache-auth`` header to a page load, may
instead send the token as the password of HTTP Basic auth (any user name): the 401 of these
paths asks for it (``WWW-Authenticate: Basic``), and the page's own requests reuse it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from promptcache.errors import PromptCacheError

from . import Report, build_report
from .html import LiveOptions, render_html, render_main
from .render import render_json

__all__ = [
    "DEFAULT_WINDOW",
    "MAX_AGE_S",
    "MAX_BUILDS",
    "REFRESH_S",
    "REPORT_PATHS",
    "WINDOWS",
    "ReportCache",
    "install",
]

#: Window choices of the live page: name -> seconds back from now.
WINDOWS: Final[dict[str, int]] = {"15m": 900, "1h": 3600, "24h": 86400, "7d": 7 * 86400}
DEFAULT_WINDOW: Final = "1h"
#: The paths this module serves (the auth middleware offers Basic auth on them, and on /metrics).
REPORT_PATHS: Final = frozenset({"/report", "/report.json"})
_NO_STORE: Final = {"cache-control": "no-store"}
#: Seconds a window's report is served as built, new rows or not (the page polls every few).
REFRESH_S: Final = 5.0
#: Seconds after which a window's report is rebuilt even with no new rows.
MAX_AGE_S: Final = 60.0
#: Reports built at once, over all windows (each holds a worker thread while it reads the log).
MAX_BUILDS: Final = 1

#: What a request asks for: the JSON report, the page body (``part=main``) or the whole page.
Kind = Literal["json", "main", "page"]


@dataclass
class _Built:
    """One window's report and its renderings."""

    report: Report
    at: float  # time.monotonic() when the build started
    version: int | None  # the log's data_version read before the build
    texts: dict[str, str] = field(default_factory=dict)


class ReportCache:
    """The built report of each window of one log, shared by all requests (see the module
    docstring).

    Attributes:
        builds: how many reports were built (read by tests and for diagnosis).
    """

    def __init__(
        self,
        db_path: Path | str,
        clock: Callable[[], float] = time.time,
        *,
        refresh_s: float = REFRESH_S,
        max_age_s: float = MAX_AGE_S,
        max_builds: int = MAX_BUILDS,
    ) -> None:
        self.db_path = db_path
        self.clock = clock
        self.refresh_s = refresh_s
        self.max_age_s = max_age_s
        self.builds = 0
        self._limiter = anyio.CapacityLimiter(max_builds)
        self._built: dict[str, _Built] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._conn: sqlite3.Connection | None = None

    async def text(self, window: str, kind: Kind) -> str:
        """The rendered report of ``window`` (a key of :data:`WINDOWS`) as ``kind``.

        Raises:
            PromptCacheError: the log cannot be read (``build_report``'s errors).
        """
        lock = self._locks.setdefault(window, anyio.Lock())
        async with lock:
            built = self._built.get(window)
            if built is None or self._stale(built):
                version = self._version()
                started = time.monotonic()
                now = self.clock()
                report = await anyio.to_thread.run_sync(
                    lambda: build_report(
                        self.db_path, since=now - WINDOWS[window], until=now, now=now
                    ),
                    limiter=self._limiter,
                )
                self.builds += 1
                built = self._built[window] = _Built(report, started, version)
            text = built.texts.get(kind)
            if text is None:
                text = await anyio.to_thread.run_sync(
                    _render, built.report, window, kind, limiter=self._limiter
                )
                built.texts[kind] = text
            return text

    def close(self) -> None:
        """Close the connection that reads the log's version."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _stale(self, built: _Built) -> bool:
        age = time.monotonic() - built.at
        if age < self.refresh_s:
            return False
        if age >= self.max_age_s:
            return True
        version = self._version()
        return version is None or version != built.version

    def _version(self) -> int | None:
        """The log's ``PRAGMA data_version`` on this cache's own read-only connection: it
        changes whenever another connection (the proxy's writer) commits. None when the log
        cannot be read (then every request rebuilds, and the build reports why), and for a
        Postgres log (``db_path`` a ``postgresql://`` URL), whose other writers commit all the
        time: its reports are rebuilt every ``refresh_s``."""
        if not isinstance(self.db_path, Path):
            return None
        try:
            if self._conn is None:
                uri = f"{self.db_path.resolve().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            self.close()
            return None
        return int(row[0])


def _render(report: Report, window: str, kind: Kind) -> str:
    if kind == "json":
        return render_json(report)
    if kind == "main":
        return render_main(report)
    return render_html(report, live=LiveOptions(window, tuple(WINDOWS)))


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"type": "report_error", "message": message}}, status, _NO_STORE)


def install(
    app: Starlette,
    db_path: Path | str | None,
    clock: Callable[[], float] = time.time,
    *,
    refresh_s: float = REFRESH_S,
) -> None:
    """Add ``GET /report`` and ``GET /report.json`` to ``app`` (before its vendor routes), served
    from a :class:`ReportCache` (``app.state.report_cache``, None without a log) that rebuilds a
    window at most every ``refresh_s`` seconds.

    ``db_path`` None (recording off) answers 404 saying so; a bad ``window`` 400 listing the
    choices; a log that cannot be read 503 with the reason.
    """
    cache = None if db_path is None else ReportCache(db_path, clock, refresh_s=refresh_s)
    app.state.report_cache = cache

    async def report(request: Request, as_json: bool) -> Response:
        if cache is None:
            return _error(404, "the proxy records no log (--no-log): there is no report")
        window = request.query_params.get("window", DEFAULT_WINDOW)
        if window not in WINDOWS:
            return _error(400, f"unknown window {window!r}; use one of: {', '.join(WINDOWS)}")
        part = request.query_params.get("part")
        if part not in (None, "main"):
            return _error(400, f"unknown part {part!r}; use part=main or leave it out")
        kind: Kind = "json" if as_json else "main" if part == "main" else "page"
        try:
            text = await cache.text(window, kind)
        except PromptCacheError as exc:
            return _error(503, f"cannot read the proxy's log: {exc}")
        if as_json:
            return Response(text, media_type="application/json", headers=_NO_STORE)
        return HTMLResponse(text, headers=_NO_STORE)

    async def page(request: Request) -> Response:
        return await report(request, as_json=False)

    async def data(request: Request) -> Response:
        return await report(request, as_json=True)

    app.router.routes[0:0] = [
        Route("/report", page, methods=["GET"]),
        Route("/report.json", data, methods=["GET"]),
    ]
