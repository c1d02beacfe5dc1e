"""The proxy's garbage-collector tuning: on for the served app (``tune_gc=True``), off for an app
built for embedding (the default), so an embedding process keeps its own collector settings."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from proxy_support import mock_config
from starlette.testclient import TestClient

from promptcache.proxy.app import GC_YOUNG_THRESHOLD, build_app


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """Put the test process's collector back as it was (thresholds, nothing frozen)."""
    thresholds = gc.get_threshold()
    frozen = gc.get_freeze_count()
    try:
        yield
    finally:
        if gc.get_freeze_count() > frozen:
            gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_the_served_app_freezes_its_startup_objects_and_raises_the_young_threshold(
    tmp_path: Path, collector_restored: None
) -> None:
    gc.unfreeze()
    older = gc.get_threshold()[1:]
    app = build_app(mock_config("http://127.0.0.1:9", tmp_path / "log.db"), tune_gc=True)
    with TestClient(app) as client:
        # the app's own objects and everything imported before it: the permanent generation
        assert gc.get_freeze_count() > 1000
        assert client.get("/healthz").status_code == 200
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *older)


def test_an_app_built_for_embedding_leaves_the_collector_alone(
    tmp_path: Path, collector_restored: None
) -> None:
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    app = build_app(mock_config("http://127.0.0.1:9", tmp_path / "log.db"))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == (700, 10, 10)
