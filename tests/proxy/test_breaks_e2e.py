"""Cache-break explanation and the report, end to end through a live proxy.

The official ``anthropic`` client talks to a proxy under uvicorn on 127.0.0.1, in front of the
mock upstream (tests/proxy/upstreams.py). A fake clock drives the proxy's ``started_at`` so a
gap longer than the 5-minute TTL costs nothing. The script, one request each:

==  =====  =========================================  ======================  ====================
#   t (s)  what changes                               upstream usage case     expected reason
==  =====  =========================================  ======================  ====================
1   0      first request                              miss (write 4096)       new_prefix
2   10     two more turns appended                    hit (read 10240)        - (expected hit)
3   20     timestamp in the system prompt changes     miss                    system_changed
4   30     tool list reordered                        miss                    tools_reordered
5   40     model switch (sonnet-4-5 -> opus-4-1)      miss                    model_changed
6   440    same as 5, 400 s later (> 5 min TTL)       miss                    ttl_expired
7   450    history truncated (first turn dropped)     miss                    history_rewritten
8   460    one more turn, but the vendor reads 0      miss                    - (unexpected miss)
==  =====  =========================================  ======================  ====================

Then the report over the log is checked against numbers worked out by hand from the mock's
recorded usage bodies and the bundled prices.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from proxy_support import FakeClock, RunningProxy, mock_config
from servers import ServerThread

from promptcache.cli import cli
from promptcache.proxy.app import build_app
from promptcache.proxy.report import build_report

T0 = 1_764_493_200.0  # 2025-11-30 09:00:00 UTC, the start of an hour
KEY = "sk-ant-api03-breaks-test-0123456789abcdef"
SONNET, OPUS = "claude-sonnet-4-5", "claude-opus-4-1"
BASE_SYSTEM = "You are the support agent of Acme Anvils. Answer briefly and cite the manual. " * 30


def system(clock_text: str) -> list[dict[str, Any]]:
    text = BASE_SYSTEM + f"Current time: {clock_text}"
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Look up an order in the Acme order database.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    }


TOOLS = [tool("get_order"), tool("get_refund"), tool("get_shipping")]
REORDERED = [TOOLS[1], TOOLS[0], TOOLS[2]]


def turns(n: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` alternating messages; the last one carries a cache breakpoint."""
    messages: list[dict[str, Any]] = []
    for i in range(start, start + n):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": f"turn {i} " * 20}]})
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return messages


HIT, MISS = "cache_read_and_write_5m", "no_ttl_split"
# (uncached, cache read, write 5m, write unknown, output) from tests/data/vendors/anthropic/*.json
USAGE = {HIT: (1532, 10240, 2048, 0, 220), MISS: (12, 0, 0, 4096, 88)}
# USD per million tokens, promptcache/data/prices.toml (input, read, write 5m, output)
PRICE = {
    SONNET: (Decimal(3), Decimal("0.30"), Decimal("3.75"), Decimal(15)),
    OPUS: (Decimal(15), Decimal("1.50"), Decimal("18.75"), Decimal(75)),
}


@dataclass(frozen=True)
class Step:
    at: float
    model: str
    tools: list[dict[str, Any]]
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    case: str
    stream: bool = False


STEPS = [
    Step(0, SONNET, TOOLS, system("2025-11-30T09:00Z"), turns(1), MISS),
    Step(10, SONNET, TOOLS, system("2025-11-30T09:00Z"), turns(3), HIT, stream=True),
    Step(20, SONNET, TOOLS, system("2025-11-30T09:05Z"), turns(3), MISS),
    Step(30, SONNET, REORDERED, system("2025-11-30T09:05Z"), turns(3), MISS),
    Step(40, OPUS, REORDERED, system("2025-11-30T09:05Z"), turns(3), MISS, stream=True),
    Step(440, OPUS, REORDERED, system("2025-11-30T09:05Z"), turns(3), MISS),
    Step(450, OPUS, REORDERED, system("2025-11-30T09:05Z"), turns(3, start=2), MISS),
    Step(460, OPUS, REORDERED, system("2025-11-30T09:05Z"), turns(5, start=2), MISS),
]


@pytest.fixture(scope="module")
def logged(
    mock_server: ServerThread, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningProxy, list[dict[str, Any]]]]:
    """Run the script once through a live proxy; yield it and its rows, oldest first."""
    clock = FakeClock(T0)
    db_path = tmp_path_factory.mktemp("breaks") / "log.db"
    app = build_app(mock_config(mock_server.url, db_path, clock=clock))
    with (
        ServerThread(app) as server,
        anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0) as client,
    ):
        proxy = RunningProxy(server.url, db_path, app, server)
        for step in STEPS:
            clock.now = T0 + step.at
            kwargs: dict[str, Any] = {
                "model": step.model,
                "max_tokens": 64,
                "tools": step.tools,
                "system": step.system,
                "messages": step.messages,
                "extra_headers": {"x-mock-case": step.case},
            }
            if step.stream:
                with client.messages.stream(**kwargs) as stream:
                    stream.get_final_message()
            else:
                client.messages.create(**kwargs)
        rows = proxy.rows(len(STEPS))
        yield proxy, rows


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_every_step_gets_the_scripted_reason(logged: Any) -> None:
    _, rows = logged
    assert [r["started_at"] - T0 for r in rows] == [s.at for s in STEPS]
    reasons = [r["break_reason"] for r in rows]
    assert reasons == [
        "new_prefix",
        None,
        "system_changed",
        "tools_reordered",
        "model_changed",
        "ttl_expired",
        "history_rewritten",
        None,
    ]
    ids = [r["id"] for r in rows]
    assert [r["previous_request_id"] for r in rows] == [None, *ids[:-1]]
    assert [r["expected_hit"] for r in rows] == [0, 1, 0, 0, 0, 0, 0, 1]
    assert [r["unexpected_miss"] for r in rows] == [0, 0, 0, 0, 0, 0, 0, 1]
    assert all(r["break_excerpt"] is None for r in rows)  # bodies are not stored


def test_system_timestamp_names_the_segment_and_offset(logged: Any) -> None:
    _, rows = logged
    row = rows[2]
    old, new = STEPS[1].system[0]["text"], STEPS[2].system[0]["text"]
    assert row["break_segment"] == "system[0].text"
    # the position counts characters of the system prompt's text, as the user wrote it
    assert row["break_offset"] == _common_prefix(old, new)
    # the first differing character is the minute of the timestamp
    assert new[row["break_offset"] - len("2025-11-30T09:0") : row["break_offset"] + 1] == (
        "2025-11-30T09:05"
    )


def test_reordered_tools_name_the_first_moved_tool(logged: Any) -> None:
    _, rows = logged
    row = rows[3]
    assert row["break_segment"] == "tools[0].name"
    assert row["break_offset"] == _common_prefix(TOOLS[0]["name"], REORDERED[0]["name"])


def test_model_switch_and_ttl_gap_have_no_segment(logged: Any) -> None:
    _, rows = logged
    for row in (rows[4], rows[5]):
        assert row["break_segment"] is None and row["break_offset"] is None


def test_truncated_history_points_at_the_first_message(logged: Any) -> None:
    _, rows = logged
    row = rows[6]
    assert row["break_segment"] == "messages[0].content[0].text"
    old = STEPS[5].messages[0]["content"][0]["text"]
    new = STEPS[6].messages[0]["content"][0]["text"]
    assert row["break_offset"] == _common_prefix(old, new)


def _cost(model: str, case: str) -> Decimal:
    uncached, read, w5, wu, out = USAGE[case]
    p_in, p_read, p_w5, p_out = PRICE[model]
    return (uncached * p_in + read * p_read + (w5 + wu) * p_w5 + out * p_out) / 1_000_000


def _without_cache(model: str, case: str) -> Decimal:
    uncached, read, w5, wu, out = USAGE[case]
    p_in, _, _, p_out = PRICE[model]
    return ((uncached + read + w5 + wu) * p_in + out * p_out) / 1_000_000


def test_report_numbers_match_the_hand_computed_ones(logged: Any) -> None:
    proxy, _ = logged
    report = build_report(proxy.db_path, since=T0, until=T0 + 3600, now=T0 + 7200)
    total = report.total
    hit_usage, miss_usage = USAGE[HIT], USAGE[MISS]
    hit_input, miss_input = sum(hit_usage[:4]), sum(miss_usage[:4])
    assert total.requests == 8 and total.requests_with_usage == 8 and total.errors == 0
    assert total.cache_read_tokens == 10240
    assert total.total_input_tokens == hit_input + 7 * miss_input
    assert total.cache_write_5m_tokens == 2048 and total.cache_write_unknown_tokens == 7 * 4096
    assert total.token_hit_rate == pytest.approx(10240 / (hit_input + 7 * miss_input))
    assert total.request_hit_rate == pytest.approx(10240 / hit_input / 8)
    assert total.hit_requests == 1
    models = [s.model for s in STEPS]
    cases = [s.case for s in STEPS]
    cost = sum(_cost(m, c) for m, c in zip(models, cases, strict=True))
    without = sum(_without_cache(m, c) for m, c in zip(models, cases, strict=True))
    assert total.cost_usd == pytest.approx(float(cost))
    assert total.cost_without_cache_usd == pytest.approx(float(without))
    assert total.net_savings_usd == pytest.approx(float(without - cost))
    # the first request opens the prefix (new_prefix): counted apart, not as a break
    assert (total.breaks, total.new_prefixes, total.unexpected_misses) == (5, 1, 1)

    reasons = {b.reason: b for b in report.break_reasons}
    assert {r: b.breaks for r, b in reasons.items()} == {
        "system_changed": 1,
        "tools_reordered": 1,
        "model_changed": 1,
        "ttl_expired": 1,
        "history_rewritten": 1,
    }
    # tokens lost = min(input not read, what the predecessor had cached: its reads + writes)
    after_hit = min(miss_input, 10240 + 2048)  # step 3 follows the hit of step 2
    after_miss = min(miss_input, 4096)
    assert reasons["system_changed"].tokens_lost == after_hit
    assert reasons["tools_reordered"].tokens_lost == after_miss
    # every miss wrote 4,096 tokens (TTL unknown: the 5m rate); lost tokens it paid as writes
    # cost (write - read), the rest (input - read)
    p_in, p_read, p_w5, _ = PRICE[SONNET]
    written = min(after_hit, 4096)
    assert reasons["system_changed"].usd_lost == pytest.approx(
        float((written * (p_w5 - p_read) + (after_hit - written) * (p_in - p_read)) / 1_000_000)
    )
    assert reasons["ttl_expired"].usd_lost == pytest.approx(
        float(after_miss * (PRICE[OPUS][2] - PRICE[OPUS][1]) / 1_000_000)
    )
    assert reasons["system_changed"].top_segment == "system[0].text"
    assert reasons["tools_reordered"].example_ids == (logged[1][3]["id"],)

    # wasted writes: every write except step 1's (read by step 2) was never read back
    wasted = report.wasted_writes
    assert wasted.tokens == 2048 + 6 * 4096 and wasted.requests == 7
    premium = (
        2048 * (PRICE[SONNET][2] - PRICE[SONNET][0])
        + 2 * 4096 * (PRICE[SONNET][2] - PRICE[SONNET][0])
        + 4 * 4096 * (PRICE[OPUS][2] - PRICE[OPUS][0])
    )
    assert wasted.premium_usd == pytest.approx(float(premium / 1_000_000))

    ttft_rows = [r for r in logged[1]]
    hits = sorted(r["ttft_ms"] for r in ttft_rows if r["cache_read_tokens"] > 0)
    misses = sorted(r["ttft_ms"] for r in ttft_rows if r["cache_read_tokens"] == 0)
    by_class = {t.hit: t for t in report.ttft}
    assert (by_class[True].requests, by_class[True].p50_ms) == (1, hits[0])
    assert by_class[False].requests == 7
    assert by_class[False].p50_ms == misses[3] and by_class[False].p95_ms == misses[6]

    kinds = [r.kind for r in report.recommendations]
    assert kinds[0] == "prefix_stability"  # hit rate is low: stability comes first
    # the costliest content break (opus prices; ties by name) is named with its segment
    assert report.break_reasons[0].reason == "history_rewritten"
    assert "`messages[0].content[0].text` (history_rewritten" in report.recommendations[0].message
    assert "wasted_writes" in kinds


def test_report_cli_formats_and_alert_thresholds(logged: Any, tmp_path: Path) -> None:
    proxy, _ = logged
    window = ["--db", str(proxy.db_path), "--since", str(T0), "--until", str(T0 + 3600)]
    runner = CliRunner()
    table = runner.invoke(cli, ["report", *window, "--group-by", "model"])
    assert table.exit_code == 0, table.output
    assert "system_changed" in table.output and OPUS in table.output

    as_json = runner.invoke(cli, ["report", *window, "--format", "json"])
    data = json.loads(as_json.output)
    assert data["total"]["requests"] == 8

    as_csv = runner.invoke(cli, ["report", *window, "--format", "csv", "--group-by", "model"])
    lines = as_csv.output.strip().splitlines()
    assert lines[0].startswith("group,requests,") and lines[-1].startswith("(total),8,")
    assert {line.split(",")[0] for line in lines[1:-1]} == {SONNET, OPUS}

    failing = runner.invoke(cli, ["report", *window, "--fail-under-hit-rate", "0.6"])
    assert failing.exit_code == 1 and "hit rate" in failing.output
    cheap = runner.invoke(cli, ["report", *window, "--fail-over-cost", "0.0001"])
    assert cheap.exit_code == 1 and "cost" in cheap.output
    passing = runner.invoke(
        cli, ["report", *window, "--fail-under-hit-rate", "0.01", "--fail-over-cost", "100"]
    )
    assert passing.exit_code == 0, passing.output


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_count_the_same_traffic(logged: Any) -> None:
    proxy, rows = logged
    samples = _samples(httpx.get(f"{proxy.url}/metrics").text)
    sonnet = {("vendor", "anthropic"), ("model", SONNET)}
    opus = {("vendor", "anthropic"), ("model", OPUS)}
    assert samples["promptcache_requests_total", frozenset({*sonnet, ("status", "200")})] == 4
    assert samples["promptcache_cache_read_tokens_total", frozenset(sonnet)] == 10240
    assert samples[
        "promptcache_cache_write_tokens_total", frozenset({*opus, ("ttl", "unknown")})
    ] == (4 * 4096)
    for reason, model in [("system_changed", sonnet), ("ttl_expired", opus)]:
        key = ("promptcache_cache_breaks_total", frozenset({*model, ("reason", reason)}))
        assert samples[key] == 1
    # the first request of a family is not a break, as the report counts it
    assert not [k for k in samples if ("reason", "new_prefix") in k[1]]
    new = sum(v for (name, _), v in samples.items() if name == "promptcache_new_prefixes_total")
    assert new == sum(r["break_reason"] == "new_prefix" for r in rows) == 1
    assert samples["promptcache_unexpected_misses_total", frozenset(opus)] == 1
    assert samples["promptcache_ttft_seconds_count", frozenset(sonnet)] == 4
    health = httpx.get(f"{proxy.url}/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
