"""Proxy metrics: per-app registries, errors, label cap, a hook that never raises, lost log rows."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from proxy_support import RunningProxy
from starlette.applications import Starlette
from starlette.testclient import TestClient

from promptcache.cli import cli
from promptcache.proxy.config import RouteRule, UpstreamConfig
from promptcache.proxy.metrics import MAX_MODEL_LABELS, ProxyMetrics, install
from promptcache.proxy.record import RequestRecord
from promptcache.proxy.store import RequestStore


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
    for status in (200, 404, 529, 502, 0):
        metrics(record(status=status))
    errors = {
        dict(labels)["status"]: v
        for (name, labels), v in values(metrics).items()
        if name == "promptcache_upstream_errors_total"
    }
    assert errors == {"529": 1, "502": 1}  # a transport failure is the proxy's 502 / 504


def test_a_client_that_leaves_before_the_answer_is_no_upstream_error(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # The upstream answers after 3 s; the client gives up after 0.5 s. Its row has no status
    # (nothing was answered), which the counter took for a transport failure of the upstream,
    # so every user who pressed stop raised the upstream error rate.
    proxy = start_proxy()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            proxy.url + "/v1/chat/completions",
            json=CHAT,
            headers={"x-mock-fault": "slow"},
            timeout=0.5,
        )
    row = proxy.row()
    assert row["status"] is None and row["error"].startswith("client disconnected")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(httpx.get(proxy.url + "/metrics").text)
        for s in family.samples
    }
    labels = (("model", "gpt-4o"), ("status", "0"), ("vendor", "openai"))
    assert samples[("promptcache_requests_total", labels)] == 1
    assert not [k for k in samples if k[0] == "promptcache_upstream_errors_total"]
    # an upstream that fails is still one
    httpx.post(
        proxy.url + "/v1/chat/completions", json=CHAT, headers={"x-mock-fault": "status-503"}
    )
    proxy.rows(2)
    text = httpx.get(proxy.url + "/metrics").text
    assert (
        'promptcache_upstream_errors_total{model="gpt-4o",status="503",vendor="openai"} 1.0' in text
    )


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


def dropped(text: str) -> dict[str, float]:
    """``promptcache_log_rows_dropped_total`` by ``reason`` in a /metrics page."""
    return {
        s.labels["reason"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "promptcache_log_rows_dropped_total"
    }


CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}


def test_rows_dropped_on_a_stalled_log_are_counted_and_health_is_degraded(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # Another connection holds the log's write lock, so the writer waits (as on a stalled disk);
    # with room for two queued rows the later rows of six are dropped.
    proxy = start_proxy(queue_rows=2, batch_rows=1)
    assert httpx.get(proxy.url + "/healthz").json() == {
        "status": "ok",
        "writer_queue": 0,
        "log_rows_dropped": 0,
    }
    assert dropped(httpx.get(proxy.url + "/metrics").text) == {
        "queue_full": 0,
        "write_failed": 0,
    }
    lock = sqlite3.connect(proxy.db_path, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        for _ in range(6):
            assert httpx.post(proxy.url + "/v1/chat/completions", json=CHAT).status_code == 200
        health = httpx.get(proxy.url + "/healthz").json()
        counts = dropped(httpx.get(proxy.url + "/metrics").text)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert health["status"] == "degraded"
    assert counts["queue_full"] >= 3 and counts["write_failed"] == 0
    assert health["log_rows_dropped"] == counts["queue_full"]
    assert len(proxy.rows(6 - int(counts["queue_full"]))) == 6 - counts["queue_full"]


def test_rows_sqlite_refuses_are_counted_and_health_recovers(tmp_path: Path) -> None:
    # A trigger makes SQLite refuse every insert, as a full disk does; once it is gone the log
    # takes rows again and, after the window, health is back to ok.
    store = RequestStore(tmp_path / "log.db", flush_interval_s=0.02)
    app = Starlette()
    app.state.store = store
    install(app, degraded_for_s=0.5)
    conn = sqlite3.connect(tmp_path / "log.db")
    with conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON requests "
            "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    store.start()
    try:
        store.submit(record().as_row())
        assert store.flush()
        with TestClient(app) as client:
            assert dropped(client.get("/metrics").text) == {"queue_full": 0, "write_failed": 1}
            health = client.get("/healthz")
            assert health.status_code == 200  # forwarding works; only the log is incomplete
            assert health.json()["status"] == "degraded"
            assert health.json()["log_rows_dropped"] == 1
            with conn:
                conn.execute("DROP TRIGGER refuse")
            row = RequestRecord(id="r2", started_at=1.0)
            store.submit(row.as_row())
            assert store.flush() and store.written_rows == 1
            time.sleep(0.6)
            assert client.get("/healthz").json()["status"] == "ok"
    finally:
        conn.close()
        store.close()


def test_a_scrape_job_reads_metrics_behind_the_auth_token_with_basic_auth(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # a proxy beyond loopback needs --auth-token; Prometheus sends it as basic_auth's password
    # (any user name), as a browser does for the live report, where it may send no other header
    token = "scrape-token-0123456789"
    proxy = start_proxy(auth_token=token)
    refused = httpx.get(proxy.url + "/metrics")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic ")
    assert httpx.get(proxy.url + "/metrics", auth=("prometheus", "guess")).status_code == 401
    scraped = httpx.get(proxy.url + "/metrics", auth=("prometheus", token))
    assert scraped.status_code == 200
    names = {f.name for f in text_string_to_metric_families(scraped.text)}
    assert "promptcache_requests" in names
    header = httpx.get(proxy.url + "/metrics", headers={"x-promptcache-auth": token})
    assert header.status_code == 200
    # the vendor routes still want the header, never Basic auth
    vendor = httpx.post(proxy.url + "/v1/chat/completions", json={}, auth=("", token))
    assert vendor.status_code == 401


def test_a_model_name_with_a_lone_surrogate_does_not_break_the_scrape(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # "\ud800" is valid JSON but no UTF-8 text: as a label it made every later scrape a 500
    proxy = start_proxy()
    body = b'{"model": "gpt-\\ud800", "messages": [{"role": "user", "content": "hi"}]}'
    reply = httpx.post(
        proxy.url + "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 200
    scraped = httpx.get(proxy.url + "/metrics")
    assert scraped.status_code == 200, scraped.text
    requests = next(
        f for f in text_string_to_metric_families(scraped.text) if f.name == "promptcache_requests"
    )
    assert {s.labels["model"] for s in requests.samples if s.name.endswith("_total")} == {
        "gpt-\\ud800"  # escaped, as the log stores it
    }


def test_a_request_without_a_model_is_model_none_in_metrics_as_in_the_report(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # the same request is one group under one name in /metrics and in `report --group-by model`
    proxy = start_proxy()
    reply = httpx.post(
        proxy.url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
    )
    assert reply.status_code == 200
    proxy.rows(1)
    scraped = httpx.get(proxy.url + "/metrics")
    requests = next(
        f for f in text_string_to_metric_families(scraped.text) if f.name == "promptcache_requests"
    )
    assert {s.labels["model"] for s in requests.samples if s.name.endswith("_total")} == {"(none)"}
    result = CliRunner().invoke(
        cli,
        ["report", "--db", str(proxy.db_path), "--group-by", "model", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    assert [g["group"] for g in json.loads(result.stdout)["groups"]] == ["(none)"]


def test_health_without_a_log_is_the_status_alone(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # docs/report.md: under --no-log /healthz has no writer_queue or log_rows_dropped to give
    proxy = start_proxy(db_path=None)
    assert httpx.post(
        proxy.url + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    ).is_success
    health = httpx.get(proxy.url + "/healthz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})


def _requests_by_vendor(proxy: RunningProxy) -> dict[str, float]:
    scraped = httpx.get(proxy.url + "/metrics").text
    family = next(
        f for f in text_string_to_metric_families(scraped) if f.name == "promptcache_requests"
    )
    return {s.labels["vendor"]: s.value for s in family.samples if s.name.endswith("_total")}


def test_a_body_refused_before_it_went_upstream_counts_under_its_routes_vendor(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # the test config sends /v1/messages to anthropic, /v1beta/ to gemini and the rest to
    # openai by path alone: a body the proxy refuses (not JSON, too large) was bound for that
    # vendor whatever it held, so the log and /metrics name it rather than vendor="unknown"
    proxy = start_proxy(max_body_bytes=1_000)
    refused = [
        httpx.post(proxy.url + "/v1/messages", content=b"{not json"),
        httpx.post(proxy.url + "/v1/chat/completions", content=b"x" * 2_000),
        httpx.post(proxy.url + "/v1beta/models/gemini-2.5-flash:generateContent", content=b"["),
    ]
    assert [r.status_code for r in refused] == [400, 413, 400]
    rows = proxy.rows(3)
    assert sorted(r["vendor"] for r in rows) == ["anthropic", "gemini", "openai"]
    assert {r["upstream"] for r in rows} == {None}  # it went nowhere
    assert _requests_by_vendor(proxy) == {"anthropic": 1, "gemini": 1, "openai": 1}


def test_a_refused_body_whose_model_would_choose_the_vendor_is_vendor_unknown(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    # a model rule sends local/ models to an engine: a chat body that cannot be read could have
    # gone to the engine or to openai, so neither is named; a Gemini path names its model, so
    # its refused body is still gemini's
    engine = UpstreamConfig(name="local", url="http://127.0.0.1:9", vendor="engine")
    proxy = start_proxy(
        upstreams={"local": engine}, rules=(RouteRule("local", model_prefix="local/"),)
    )
    assert httpx.post(proxy.url + "/v1/chat/completions", content=b"{").status_code == 400
    gemini = proxy.url + "/v1beta/models/gemini-2.5-flash:generateContent"
    assert httpx.post(gemini, content=b"{").status_code == 400
    rows = proxy.rows(2)
    assert sorted((r["route"], r["vendor"]) for r in rows) == [
        ("/v1/chat/completions", None),
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini"),
    ]
    assert _requests_by_vendor(proxy) == {"unknown": 1, "gemini": 1}
