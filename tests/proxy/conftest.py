"""Fixtures for proxy tests: a live mock vendor upstream and live proxies in front of it.

- ``mock_upstream`` (session): the ``upstreams.MockUpstream`` app under uvicorn on 127.0.0.1;
  its recorded requests are cleared before each test.
- ``start_proxy`` (function): ``start_proxy(**ProxyConfig overrides) -> RunningProxy``, a proxy
  under uvicorn on 127.0.0.1 in front of the mock (``/v1/messages*`` -> upstream ``anthropic``,
  ``/v1beta/`` -> ``gemini``, the rest -> ``openai``; all three are the mock), logging to a
  fresh SQLite file. Stopped (and its log drained) at the end of the test.

``fleet`` / ``start_fleet_proxy``: mock replicas and a proxy routing over them (fleet.py).

``postgres_server`` (session) / ``pg_url`` (function): a real Postgres server and a fresh
database on it (pg_server.py).

``engine_url`` (module): a real tinystories engine server on 127.0.0.1 (the bundled engine,
model name ``tiny``), one per test module; ``engine_chat_template`` (module) is its chat
template, None (the checkpoint's own) unless the module overrides that fixture.

Helpers the tests import (``RunningProxy``, ``read_rows``, ``mock_config``) are in
proxy_support.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet import fleet, start_fleet_proxy  # noqa: F401 (routing fixtures, see fleet.py)
from pg_server import PostgresServer, start_server
from proxy_support import RunningProxy, mock_config
from servers import ServerThread
from upstreams import MockUpstream

from promptcache.proxy.app import build_app


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


#: The small test checkpoint in the shared data (never copied into the repository).
TINYSTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "models" / "tinystories-656k"


@pytest.fixture(scope="module")
def engine_chat_template() -> str | None:
    """The chat template ``engine_url``'s engine serves chat requests with: None, the
    checkpoint's own. A module whose chat requests need another defines this fixture itself."""
    return None


@pytest.fixture(scope="module")
def engine_url(engine_chat_template: str | None) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT``) of the bundled engine serving tinystories as
    ``tiny`` (float32, 64 KV blocks, seed 0) under uvicorn. One engine per module: its prefix
    cache carries over from one test of the module to the next."""
    from promptcache.engine import LLMEngine
    from promptcache.engine.server import create_app

    assert TINYSTORIES.is_dir(), f"test checkpoint missing: {TINYSTORIES}"
    engine = LLMEngine.from_pretrained(TINYSTORIES, dtype="float32", num_blocks=64, seed=0)
    app = create_app(engine, served_model_names=["tiny"], chat_template=engine_chat_template)
    with ServerThread(app) as server:
        yield server.url


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real Postgres server for the session (pg_server.py); skips without one (fails in CI)."""
    yield from start_server()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """``postgresql://`` URL of a fresh, empty database on the session's server."""
    return postgres_server.create_database()
