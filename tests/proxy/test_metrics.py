"""Proxy metrics: per-app registries, errors, label cap, a hook that never raises."""

from __future__ import annotations

import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.testclient import TestClient

from promptcache.proxy.metrics import MAX_MODEL_LABELS, ProxyMetrics, install
from promptcache.proxy.record import RequestRecord


def values(metrics: ProxyMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def record(model: str | None = "gpt-4o", status: int = 200, **extra: object) -> RequestRecord:
    return RequestRecord(
        id="r", started_at=0.0, vendor="openai", model=model, status=status, **extra
    )  # type: ignore[arg-type]


def test_each_app_has_its_own_registry() -> None:
    first, second = ProxyMetrics(), ProxyMetrics()
    first(record(latency_ms=120.0, ttft_ms=30.0, uncached_input_tokens=7, cache_read_tokens=3,
                 cache_write_5m_tokens=0, cache_write_1h_tokens=2, cache_write_unknown_tokens=0,
                 output_tokens=4, cost_usd="0.0125", cost_without_cache_usd="0.02"))  # fmt: skip
    seen = values(first)
    labels = (("model", "gpt-4o"), ("vendor", "openai"))
    assert seen["promptcache_input_tokens_total", labels] == 7
    assert (
        seen["promptcache_cache_write_tokens_total", (*labels[:1], ("ttl", "1h"), labels[1])] == 2
    )
    assert seen["promptcache_cost_usd_total", labels] == pytest.approx(0.0125)
    assert seen["promptcache_request_latency_seconds_sum", labels] == pytest.approx(0.12)
    assert seen["promptcache_ttft_seconds_count", labels] == 1
    assert not any(name == "promptcache_input_tokens_total" for name, _ in values(second))


def test_upstream_errors_count_5xx_and_transport_failures() -> None:
    metrics = ProxyMetrics()
    for status in (200, 404, 529, 0):
        metrics(record(status=status))
    errors = {
        dict(labels)["status"]: v
        for (name, labels), v in values(metrics).items()
        if name == "promptcache_upstream_errors_total"
    }
    assert errors == {"529": 1, "0": 1}


def test_model_labels_are_capped() -> None:
    metrics = ProxyMetrics()
    for i in range(MAX_MODEL_LABELS + 5):
        metrics(record(model=f"model-{i}"))
    models = {
        dict(labels)["model"]
        for (name, labels), _ in values(metrics).items()
        if name == "promptcache_requests_total"
    }
    assert len(models) == MAX_MODEL_LABELS + 1 and "other" in models


def test_a_broken_record_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    metrics = ProxyMetrics()
    with caplog.at_level(logging.ERROR):
        metrics(record(cost_usd="not a number"))
    assert "metrics hook failed" in caplog.text


def test_install_serves_metrics_and_health() -> None:
    app = Starlette()
    metrics = install(app)
    assert app.state.record_hooks == [metrics]
    metrics(record())
    with TestClient(app) as client:
        page = client.get("/metrics")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
        assert "promptcache_requests_total" in page.text
        assert client.get("/healthz").json() == {"status": "ok"}
