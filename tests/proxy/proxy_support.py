"""Helpers the proxy tests import: ``RunningProxy``, ``read_rows``, ``mock_config``, ``FakeClock``,
``log_at_version``.

They live here, not in conftest.py, because ``from conftest import ...`` resolves to whichever
conftest.py pytest put on ``sys.path`` first, which breaks runs that collect several test folders.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from servers import ServerThread
from sqlite_utils import Database
from starlette.applications import Starlette

from promptcache.proxy.config import ProxyConfig, RouteRule, UpstreamConfig


@dataclass
class RunningProxy:
    """A proxy serving on ``url`` and logging to ``db_path``."""

    url: str
    db_path: Path
    app: Starlette
    server: ServerThread

    def rows(self, count: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Wait until at least ``count`` rows are on disk; all rows, oldest first."""
        deadline = time.monotonic() + timeout_s
        while True:
            store = self.app.state.store
            if store is not None and self.server.server.started:
                store.flush(timeout_s)
            rows = read_rows(self.db_path)
            if len(rows) >= count or time.monotonic() > deadline:
                assert len(rows) >= count, f"expected {count} rows in the log, found {len(rows)}"
                return rows
            time.sleep(0.02)

    def row(self) -> dict[str, Any]:
        """The only row of the log (waits for it)."""
        rows = self.rows(1)
        assert len(rows) == 1, rows
        return rows[0]


def read_rows(db_path: Path) -> list[dict[str, Any]]:
    """Every row of ``requests`` in a log file, read with a plain sqlite3 connection."""
    if not db_path.exists():
        return []
    conn = sqlite3.connect(db_path)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT * FROM requests ORDER BY started_at").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [dict(r) for r in rows]


def mock_config(upstream_url: str, db_path: Path | None, **overrides: Any) -> ProxyConfig:
    """The test proxy config: three vendor upstreams, all served by the mock."""
    upstreams = {
        name: UpstreamConfig(name=name, url=upstream_url, vendor=name)
        for name in ("anthropic", "openai", "gemini")
    }
    upstreams.update(overrides.pop("upstreams", {}))
    rules = (
        *overrides.pop("rules", ()),
        RouteRule("anthropic", path_prefix="/v1/messages"),
        RouteRule("gemini", path_prefix="/v1beta/"),
    )
    settings: dict[str, Any] = {"db_path": db_path, "flush_interval_s": 0.05}
    settings.update(overrides)
    return ProxyConfig(upstreams=upstreams, default_upstream="openai", rules=rules, **settings)


def wait_until_serving(proc: subprocess.Popen[str], url: str, timeout_s: float = 30) -> None:
    """Poll ``url`` until a proxy started as ``proc`` answers (any status); fails the test if
    the process exits or ``timeout_s`` seconds pass first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, "proxy did not start"
            time.sleep(0.1)


class FakeClock:
    """The proxy's wall clock (``ProxyConfig(clock=...)``), set by the test: ``clock.now``."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def log_at_version(path: Path, version: int) -> Database:
    """A new log at ``path`` migrated only to schema ``version`` (a log an older promptcache
    wrote), open for the test to insert rows; the caller closes it."""
    from promptcache.proxy.store import MIGRATIONS

    db = Database(path)
    db.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    for number, step in enumerate(MIGRATIONS[:version], 1):
        step(db)
        db.execute("INSERT INTO schema_version VALUES (?, 0)", [number])
    return db
