"""Fixtures for proxy tests: a live mock vendor upstream and live proxies in front of it.

- ``mock_upstream`` (session): the ``upstreams.MockUpstream`` app under uvicorn on 127.0.0.1;
  its recorded requests are cleared before each test.
- ``start_proxy`` (function): ``start_proxy(**ProxyConfig overrides) -> RunningProxy``, a proxy
  under uvicorn on 127.0.0.1 in front of the mock (``/v1/messages*`` -> upstream ``anthropic``,
  ``/v1beta/`` -> ``gemini``, the rest -> ``openai``; all three are the mock), logging to a
  fresh SQLite file. Stopped (and its log drained) at the end of the test.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from servers import ServerThread
from starlette.applications import Starlette
from upstreams import MockUpstream

from promptcache.proxy.app import build_app
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


@pytest.fixture(scope="session")
def mock_server() -> Iterator[ServerThread]:
    with ServerThread(MockUpstream(), graceful_shutdown_s=1.0) as server:
        yield server


@pytest.fixture
def mock_upstream(mock_server: ServerThread) -> MockUpstream:
    upstream = mock_server.app
    assert isinstance(upstream, MockUpstream)
    upstream.reset()
    return upstream


@pytest.fixture
def start_proxy(
    tmp_path: Path, mock_server: ServerThread, mock_upstream: MockUpstream
) -> Iterator[Callable[..., RunningProxy]]:
    running: list[ServerThread] = []

    def start(**overrides: Any) -> RunningProxy:
        db_path = overrides.pop("db_path", tmp_path / f"log{len(running)}.db")
        app = build_app(mock_config(mock_server.url, db_path, **overrides))
        server = ServerThread(app).__enter__()
        running.append(server)
        return RunningProxy(server.url, db_path, app, server)

    yield start
    for server in running:
        server.stop()
