"""The live report on the proxy: ``GET /report`` (the HTML page) and ``GET /report.json``.

``/report.json?window=W`` is exactly ``promptcache report --format json --since W`` of the
proxy's own log; ``/report?window=W`` is the HTML page of the same window with a window
selector (:data:`WINDOWS`) and a script that polls ``/report.json`` every few seconds and, when
its numbers change, fetches ``/report?part=main`` (the page body alone) and swaps it in. Both
are answered by the proxy itself, never forwarded upstream, and read the log read-only in a
worker thread (rows reach the log within the writer's flush interval).

Auth: with an auth token set, :class:`.middleware.AuthMiddleware` guards these paths like
every other; a browser, which cannot add the ``x-promptcache-auth`` header to a page load, may
instead send the token as the password of HTTP Basic auth (any user name): the 401 of these
paths asks for it (``WWW-Authenticate: Basic``), and the page's own requests reuse it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from promptcache.errors import PromptCacheError

from .middleware import BASIC_AUTH_PATHS
from .report import build_report
from .report_html import LiveOptions, render_html, render_main
from .report_render import render_json

__all__ = ["DEFAULT_WINDOW", "REPORT_PATHS", "WINDOWS", "install"]

#: Window choices of the live page: name -> seconds back from now.
WINDOWS: Final[dict[str, int]] = {"15m": 900, "1h": 3600, "24h": 86400, "7d": 7 * 86400}
DEFAULT_WINDOW: Final = "1h"
#: The paths this module serves (the auth middleware offers Basic auth on them).
REPORT_PATHS: Final = BASIC_AUTH_PATHS
_NO_STORE: Final = {"cache-control": "no-store"}


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"type": "report_error", "message": message}}, status, _NO_STORE)


def install(app: Starlette, db_path: Path | None, clock: Callable[[], float] = time.time) -> None:
    """Add ``GET /report`` and ``GET /report.json`` to ``app`` (before its vendor routes).

    ``db_path`` None (recording off) answers 404 saying so; a bad ``window`` 400 listing the
    choices; a log that cannot be read 503 with the reason.
    """

    async def report(request: Request, as_json: bool) -> Response:
        if db_path is None:
            return _error(404, "the proxy records no log (--no-record): there is no report")
        window = request.query_params.get("window", DEFAULT_WINDOW)
        if window not in WINDOWS:
            return _error(400, f"unknown window {window!r}; use one of: {', '.join(WINDOWS)}")
        part = request.query_params.get("part")
        if part not in (None, "main"):
            return _error(400, f"unknown part {part!r}; use part=main or leave it out")
        now = clock()

        def render() -> str:
            built = build_report(db_path, since=now - WINDOWS[window], until=now, now=now)
            if as_json:
                return render_json(built)
            if part == "main":
                return render_main(built)
            return render_html(built, live=LiveOptions(window, tuple(WINDOWS)))

        try:
            text = await anyio.to_thread.run_sync(render)
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
