"""OpenTelemetry export (proxy/otel.py) against a real OTLP/HTTP receiver on 127.0.0.1.

The receiver accepts ``POST /v1/traces`` and decodes each body as the protobuf
``ExportTraceServiceRequest`` with ``opentelemetry-proto``. Each span's attributes are checked
one by one against the SQLite row the proxy logged for the same request (joined on
``promptcache.request_id``), the response models against the recorded vendor bodies the mock
upstream replays, and the parent span against the ``traceparent`` the client sent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fleet import FleetReplica
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from proxy_support import FakeClock, RunningProxy, read_rows, wait_until_serving
from servers import ServerThread, read_body
from starlette.types import Receive, Scope, Send
from upstreams import recorded

from promptcache.errors import ConfigError
from promptcache.proxy.config import RouteRule, UpstreamConfig, config_from_dict
from promptcache.proxy.otel import traces_url
from promptcache.proxy.routing import RoutingSettings

T0 = 1_764_493_200.0
KEY = "sk-ant-api03-otel-test-0123456789abcdef"
SYSTEM = "You are the support agent of Acme Anvils. Answer briefly and cite the manual. " * 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OtlpReceiver:
    """An OTLP/HTTP trace receiver (ASGI): keeps every span of every export it is sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.resources: list[dict[str, Any]] = []
        self.content_types: set[str] = set()
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if scope["method"] != "POST" or scope["path"] != "/v1/traces":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        export = ExportTraceServiceRequest.FromString(body)
        with self._lock:
            self.content_types.add(dict(scope["headers"]).get(b"content-type", b"").decode())
            for resource_spans in export.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(span)
                        self.resources.append(resource)
        reply = ExportTraceServiceResponse().SerializeToString()
        headers = [(b"content-type", b"application/x-protobuf")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": reply})

    def wait(self, count: int, timeout_s: float = 15.0) -> list[Span]:
        deadline = time.monotonic() + timeout_s
        while len(self.spans) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.spans) == count, f"expected {count} spans, received {len(self.spans)}"
        return list(self.spans)


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    assert kind in ("string_value", "bool_value", "int_value", "double_value"), kind
    return getattr(any_value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    items: list[KeyValue] = list(pairs)
    return {kv.key: value(kv.value) for kv in items}


@pytest.fixture
def receiver() -> Iterator[tuple[OtlpReceiver, str]]:
    app = OtlpReceiver()
    with ServerThread(app) as server:
        yield app, server.url


OPERATIONS = {
    "/v1/models": "list_models",
    "/v1/models/gpt-4o": "retrieve_model",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/messages": "chat",
    "/v1/chat/completions": "chat",
    "/v1/responses": "chat",
    "/v1/completions": "text_completion",
}
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "gemini": "gcp.gemini"}


def expected_attributes(
    row: dict[str, Any], server_url: str, response_model: str | None
) -> dict[str, Any]:
    """What the span of ``row`` must carry, worked out from the row's own columns."""
    route = row["route"]
    if route.startswith("/v1beta/"):
        operation = "count_tokens" if route.endswith(":countTokens") else "generate_content"
    else:
        operation = OPERATIONS[route]
    expected: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDERS.get(row["vendor"], row["vendor"]),
        "server.address": "127.0.0.1",
        "server.port": int(server_url.rsplit(":", 1)[1]),
        "promptcache.request_id": row["id"],
    }
    if row["model"] is not None:
        expected["gen_ai.request.model"] = row["model"]
    if response_model is not None:
        expected["gen_ai.response.model"] = response_model
    if row["stream"]:
        expected["gen_ai.request.stream"] = True
        expected["gen_ai.response.time_to_first_chunk"] = pytest.approx(row["ttft_ms"] / 1000)
    if row["total_input_tokens"] is not None:
        expected["gen_ai.usage.input_tokens"] = row["total_input_tokens"]
        expected["gen_ai.usage.output_tokens"] = row["output_tokens"]
        expected["gen_ai.usage.cache_read.input_tokens"] = row["cache_read_tokens"]
        expected["gen_ai.usage.cache_creation.input_tokens"] = (
            row["cache_write_5m_tokens"]
            + row["cache_write_1h_tokens"]
            + row["cache_write_unknown_tokens"]
        )
        if row["reasoning_tokens"]:
            expected["gen_ai.usage.reasoning.output_tokens"] = row["reasoning_tokens"]
    if row["error"] is not None:
        expected["error.type"] = str(row["status"])
    for column in ("prefix_hash", "prefix_family", "break_reason", "break_segment", "replica"):
        if row[column] is not None:
            expected[f"promptcache.{column}"] = row[column]
    for column in ("cost_usd", "cost_without_cache_usd"):
        if row[column] is not None:
            expected[f"promptcache.{column}"] = pytest.approx(float(row[column]))
    ttls = {bp["ttl"] for bp in json.loads(row["breakpoints"] or "[]")}
    if "1h" in ttls or "5m" in ttls:
        expected["promptcache.ttl_tier"] = "1h" if "1h" in ttls else "5m"
    return expected


def spans_by_request(receiver: OtlpReceiver, count: int) -> dict[str, Span]:
    spans = receiver.wait(count)
    by_id = {attributes(s.attributes)["promptcache.request_id"]: s for s in spans}
    assert len(by_id) == count
    return by_id


def check_span(span: Span, row: dict[str, Any], server_url: str, model: str | None) -> None:
    assert attributes(span.attributes) == expected_attributes(row, server_url, model)
    operation = attributes(span.attributes)["gen_ai.operation.name"]
    assert span.name == (f"{operation} {row['model']}" if row["model"] else operation)
    assert span.kind == Span.SPAN_KIND_CLIENT
    # the request's own start and end, as logged (the row keeps float seconds)
    assert abs(span.start_time_unix_nano - row["started_at"] * 1e9) < 1_000
    assert abs(span.end_time_unix_nano - row["ended_at"] * 1e9) < 1_000
    failed = row["error"] is not None
    assert span.status.code == (Status.STATUS_CODE_ERROR if failed else Status.STATUS_CODE_UNSET)
    if failed:
        assert span.status.message == row["error"]


def system(stamp: str) -> list[dict[str, Any]]:
    text = SYSTEM + f"Current time: {stamp}"
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]


def ask(client: anthropic.Anthropic, stamp: str, case: str, **extra: Any) -> None:
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=64,
        system=system(stamp),
        messages=[{"role": "user", "content": "Where is my order?"}],
        extra_headers={"x-mock-case": case},
        **extra,
    )


def test_each_request_is_one_span_whose_attributes_match_its_row(
    start_proxy: Callable[..., RunningProxy],
    mock_server: ServerThread,
    receiver: tuple[OtlpReceiver, str],
    fleet: list[FleetReplica],
) -> None:
    otlp, otlp_url = receiver
    clock = FakeClock(T0)
    pool = UpstreamConfig(
        name="pool",
        url=fleet[0].url,
        vendor="openai_compatible",
        replicas=(fleet[0].url, fleet[1].url),
        routing=RoutingSettings(health_interval_s=60.0),
    )
    proxy = start_proxy(
        otlp_endpoint=otlp_url,  # no path: /v1/traces is added
        clock=clock,
        upstreams={"pool": pool},
        rules=(RouteRule("pool", model_prefix="pool/"),),
    )
    claude = anthropic.Anthropic(api_key=KEY, base_url=proxy.url, max_retries=0)
    gpt = openai.OpenAI(api_key="sk-test", base_url=proxy.url + "/v1", max_retries=0)

    ask(claude, "09:00", "cache_read_and_write_5m")
    clock.now += 10
    ask(claude, "09:10", "no_ttl_split")  # the system prompt changed: a break
    clock.now += 10
    with gpt.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
    ) as stream:
        assert sum(1 for _ in stream) > 1
    clock.now += 10
    gemini = httpx.post(
        f"{proxy.url}/v1beta/models/gemini-2.5-flash:generateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        headers={"x-goog-api-key": "gemini-test-key"},
    )
    assert gemini.status_code == 200
    clock.now += 10
    failed = httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-mock-fault": "status-429", "authorization": "Bearer sk-test"},
    )
    assert failed.status_code == 429
    clock.now += 10
    routed = gpt.chat.completions.create(
        model="pool/tiny", messages=[{"role": "system", "content": "be brief"}]
    )
    assert routed.usage is not None

    rows = proxy.rows(6)
    proxy.server.stop()  # the proxy's shutdown exports what is still queued
    spans = spans_by_request(otlp, 6)
    assert otlp.content_types == {"application/x-protobuf"}
    assert {r["service.name"] for r in otlp.resources} == {"promptcache-proxy"}

    def model_of(api: str, case: str) -> str:
        body = json.loads(recorded(api, case, "json"))
        return str(body.get("model") or body["modelVersion"])

    replayed = [  # the response models, in request order (the fleet echoes the request's)
        model_of("anthropic", "cache_read_and_write_5m"),
        model_of("anthropic", "no_ttl_split"),
        model_of("openai_chat", "cached"),  # on every chunk of cached.sse too
        model_of("gemini", "implicit_cache_thinking"),
        None,  # the 429
        "pool/tiny",
    ]
    assert f'"model":"{replayed[2]}"'.encode() in recorded("openai_chat", "cached", "sse")
    assert len(set(replayed)) == 6
    for row, model in zip(rows, replayed, strict=True):
        server = row["replica"] or mock_server.url
        check_span(spans[row["id"]], row, server, model)

    # the rows cover what the attributes are for (so the checks above are not vacuous)
    anthropic_rows = [r for r in rows if r["route"] == "/v1/messages"]
    assert anthropic_rows[1]["break_reason"] == "system_changed"
    assert anthropic_rows[1]["break_segment"]
    assert all(json.loads(r["breakpoints"])[0]["ttl"] == "1h" for r in anthropic_rows)
    assert all(r["cost_usd"] and r["cache_read_tokens"] is not None for r in anthropic_rows)
    assert anthropic_rows[0]["cache_read_tokens"] > 0
    assert sum(r["stream"] for r in rows) == 1
    assert [r["replica"] for r in rows if r["replica"]] in ([fleet[0].url], [fleet[1].url])
    assert sum(r["error"] is not None for r in rows) == 1


def test_an_incoming_traceparent_makes_the_span_its_child(
    start_proxy: Callable[..., RunningProxy], receiver: tuple[OtlpReceiver, str]
) -> None:
    otlp, otlp_url = receiver
    proxy = start_proxy(otlp_endpoint=otlp_url + "/v1/traces")
    gpt = openai.OpenAI(api_key="sk-test", base_url=proxy.url + "/v1", max_retries=0)
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with gpt.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        extra_headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
    ) as stream:
        for _ in stream:
            pass
    gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    first, second = proxy.rows(2)
    proxy.server.stop()
    spans = spans_by_request(otlp, 2)

    child = spans[first["id"]]
    assert child.trace_id == bytes.fromhex(trace_id)
    assert child.parent_span_id == bytes.fromhex(parent_id)
    assert child.span_id not in (b"", bytes.fromhex(parent_id))
    root = spans[second["id"]]  # no traceparent: a trace of its own
    assert root.parent_span_id == b""
    assert root.trace_id not in (b"", bytes.fromhex(trace_id))


def test_streamed_response_models_and_routes_without_inference(
    start_proxy: Callable[..., RunningProxy],
    mock_server: ServerThread,
    receiver: tuple[OtlpReceiver, str],
) -> None:
    """The response model of an Anthropic stream (on ``message_start``) and a Gemini SSE stream
    (``modelVersion`` on its chunks); token counting, the model list and a model's card get
    spans too."""
    otlp, otlp_url = receiver
    proxy = start_proxy(otlp_endpoint=otlp_url)
    claude = anthropic.Anthropic(api_key=KEY, base_url=proxy.url, max_retries=0)
    with claude.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=64,
        system=system("09:00"),
        messages=[{"role": "user", "content": "Where is my order?"}],
        extra_headers={"x-mock-case": "cache_write_1h"},
    ) as stream:
        stream.until_done()
    gemini = httpx.post(
        f"{proxy.url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        headers={"x-goog-api-key": "gemini-test-key", "x-mock-case": "tool_use_prompt"},
    )
    assert gemini.status_code == 200
    counted = claude.messages.count_tokens(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens == 2095
    assert httpx.get(f"{proxy.url}/v1/models").status_code == 200
    assert httpx.get(f"{proxy.url}/v1/models/gpt-4o").status_code == 200
    rows = proxy.rows(5)
    proxy.server.stop()
    spans = spans_by_request(otlp, 5)

    sse = {
        "anthropic": recorded("anthropic", "cache_write_1h", "sse"),
        "gemini": recorded("gemini", "tool_use_prompt", "sse"),
    }
    assert b'"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL",' in sse["anthropic"]
    assert b'"model":"claude-sonnet-4-5-20250929"' in sse["anthropic"]
    assert b'"modelVersion":"gemini-2.5-pro"' in sse["gemini"]
    replayed = ["claude-sonnet-4-5-20250929", "gemini-2.5-pro", None, None, None]
    for row, model in zip(rows, replayed, strict=True):
        check_span(spans[row["id"]], row, mock_server.url, model)
    assert [r["stream"] for r in rows] == [1, 1, 0, 0, 0]
    assert rows[0]["cache_write_1h_tokens"] > 0
    names = [spans[r["id"]].name for r in rows]
    assert names[2:] == ["count_tokens claude-sonnet-4-5", "list_models", "retrieve_model gpt-4o"]


def test_spans_go_out_without_a_log(
    start_proxy: Callable[..., RunningProxy], receiver: tuple[OtlpReceiver, str]
) -> None:
    otlp, otlp_url = receiver
    proxy = start_proxy(db_path=None, otlp_endpoint=otlp_url)
    reply = httpx.post(
        f"{proxy.url}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert reply.status_code == 200
    proxy.server.stop()
    (span,) = otlp.wait(1)
    usage = json.loads(recorded("openai_chat", "cached", "json"))["usage"]
    seen = attributes(span.attributes)
    assert seen["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert seen["gen_ai.usage.cache_read.input_tokens"] == cached > 0
    assert seen["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert seen["promptcache.request_id"] == reply.headers["x-promptcache-request-id"]


def test_the_cli_exports_and_flushes_at_shutdown(
    tmp_path: Path, mock_server: ServerThread, receiver: tuple[OtlpReceiver, str]
) -> None:
    """The batch delay is 10 minutes here, so the span can only arrive through the flush at
    the proxy's shutdown; the config file's endpoint is used."""
    otlp, otlp_url = receiver
    port, db = free_port(), tmp_path / "cli.db"
    config = tmp_path / "proxy.toml"
    config.write_text(f'default_upstream = "openai"\n[otel]\nendpoint = "{otlp_url}"\n')
    proc = subprocess.Popen(
        [
            sys.executable, "-c", "from promptcache.cli import main; main()", "proxy",
            "--config", str(config), "--upstream", mock_server.url, "--port", str(port),
            "--db", str(db), "--log-level", "warning",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "600000"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url + "/nothing-here")
        reply = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert reply.status_code == 200
        assert otlp.spans == []  # batched, not sent per request
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert f"spans to {otlp_url}/v1/traces" in stderr
    (row,) = read_rows(db)
    (span,) = otlp.wait(1)
    check_span(span, row, mock_server.url, "gpt-4o-2024-08-06")


def test_missing_opentelemetry_packages_are_one_error_line(
    tmp_path: Path, mock_server: ServerThread
) -> None:
    blocked = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
    code = f"import sys; sys.modules[{blocked!r}] = None; from promptcache.cli import main; main()"
    result = subprocess.run(
        [
            sys.executable, "-c", code, "proxy", "--upstream", mock_server.url,
            "--port", str(free_port()), "--db", str(tmp_path / "log.db"),
            "--otlp-endpoint", "http://127.0.0.1:4318",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --otlp-endpoint needs the OpenTelemetry packages ({blocked} is missing); "
        "install promptcache[proxy] (in a clone of its repository: pip install '.[proxy]')"
    ]


def test_the_traces_path_goes_before_a_query() -> None:
    # 'http://collector:4318?tenant=a' became 'http://collector:4318?tenant=a/v1/traces': the
    # spans went to the collector's root path, the query's value carrying the path
    assert traces_url("http://collector:4318?tenant=a") == (
        "http://collector:4318/v1/traces?tenant=a"
    )
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("https://c.example/otlp/v1/traces") == "https://c.example/otlp/v1/traces"


def test_the_endpoint_setting() -> None:
    base = {"default_upstream": "openai"}
    from_file = config_from_dict(
        {**base, "otel": {"endpoint": "http://collector:4318"}}, source="p.toml"
    )
    assert from_file.otlp_endpoint == "http://collector:4318"
    flag_wins = config_from_dict(
        {**base, "otel": {"endpoint": "http://collector:4318"}},
        source="p.toml",
        otlp_endpoint="http://other:4318/custom/traces",
    )
    assert flag_wins.otlp_endpoint == "http://other:4318/custom/traces"
    assert config_from_dict(base, source="p.toml").otlp_endpoint is None
    flag = "http://other:4318"
    with pytest.raises(ConfigError, match=r"p\.toml: \[otel\] endpoint 'collector:4318' is not"):
        config_from_dict({**base, "otel": {"endpoint": "collector:4318"}}, source="p.toml")
    with pytest.raises(ConfigError, match=r"\[otel\] may only set endpoint"):
        config_from_dict({**base, "otel": {"url": "http://collector:4318"}}, source="p.toml")
    with pytest.raises(ConfigError, match="--otlp-endpoint 'ftp://x' is not an http"):
        config_from_dict(base, source="p.toml", otlp_endpoint="ftp://x")
    with pytest.raises(ConfigError, match=r"p\.toml: \[otel\] sets no endpoint, so no span"):
        config_from_dict({**base, "otel": {}}, source="p.toml")  # it would export nothing
    flag_only = config_from_dict({**base, "otel": {}}, source="p.toml", otlp_endpoint=flag)
    assert flag_only.otlp_endpoint == flag


def test_an_endpoint_with_a_bad_port_is_refused_and_its_password_never_shown() -> None:
    # port 99999 started the proxy, 'spans to http://127.0.0.1:99999/v1/traces', and every
    # export failed ('Failed to parse'); the upstream URL's own port is checked at the start
    base = {"default_upstream": "openai"}
    for endpoint in ("http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:port"):
        with pytest.raises(ConfigError) as refused:
            config_from_dict(base, source="p.toml", otlp_endpoint=endpoint)
        assert str(refused.value) == (
            f"--otlp-endpoint {endpoint!r} has an invalid port; give a port from 1 to 65535 "
            "(e.g. http://127.0.0.1:4318) or none for the scheme's default"
        )
    with pytest.raises(ConfigError) as refused:
        config_from_dict(base, source="p.toml", otlp_endpoint="ftp://user:S3cret-pw@collector")
    assert "S3cret" not in str(refused.value)
    assert "'ftp://***@collector' is not an http(s) URL" in str(refused.value)
    assert traces_url("http://user:pw@collector:4318") == "http://user:pw@collector:4318/v1/traces"


def test_a_model_name_with_a_lone_surrogate_does_not_lose_the_export(
    start_proxy: Callable[..., RunningProxy], receiver: tuple[OtlpReceiver, str]
) -> None:
    # "\ud800" is valid JSON but no UTF-8 text: as a span attribute it failed the protobuf
    # encoding of the whole batch, losing the other requests' spans with it
    otlp, otlp_url = receiver
    proxy = start_proxy(db_path=None, otlp_endpoint=otlp_url)
    for model in ("gpt-4o", "gpt-\\ud800"):
        body = '{"model": "' + model + '", "messages": [{"role": "user", "content": "hi"}]}'
        reply = httpx.post(
            f"{proxy.url}/v1/chat/completions",
            content=body.encode(),
            headers={"content-type": "application/json"},
        )
        assert reply.status_code == 200
    proxy.server.stop()
    spans = otlp.wait(2)
    models = sorted(attributes(s.attributes)["gen_ai.request.model"] for s in spans)
    assert models == ["gpt-4o", "gpt-\\ud800"]  # escaped, as the log stores it
    assert sorted(s.name for s in spans) == ["chat gpt-4o", "chat gpt-\\ud800"]
