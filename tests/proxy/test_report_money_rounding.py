"""The report's dollar figures round the amount the log holds, not the binary noise of its float
sums: a half rounds away from zero, as the JSON's exact figure says it should.

A proxy under uvicorn on 127.0.0.1 in front of a small Anthropic upstream that answers each
request with the usage the test picks (a 3,000-token 5-minute write, then a miss of the same
size), the official ``anthropic`` client, a real SQLite log, then ``promptcache report`` as
text, JSON and HTML. At claude-sonnet-4-5's rates the window costs $0.02046 against $0.01821
without cache, so caching lost exactly $0.00225 (the write's premium, never read), but the
difference of the two float sums is -0.0022499999999999985.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner
from proxy_support import RunningProxy, mock_config
from servers import ServerThread
from upstreams import request_body

from promptcache.cli import cli
from promptcache.proxy.app import build_app

#: Usage per user message: a 5-minute write of the system prompt, a read of it, or a miss.
USAGE = {
    "write": {
        "input_tokens": 10,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 3000, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 5,
    },
    "read": {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 3000,
        "output_tokens": 5,
    },
    "miss": {
        "input_tokens": 3010,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
    },
}


async def _upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    raw = await request_body(scope, receive, send)
    if raw is None:
        return
    body = json.loads(raw)
    kind = body["messages"][-1]["content"]
    answer = {
        "id": f"msg_{kind}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": USAGE[kind],
    }
    payload = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[RunningProxy]:
    with ServerThread(_upstream) as upstream:
        app = build_app(mock_config(upstream.url, tmp_path / "log.db"))
        with ServerThread(app) as server:
            yield RunningProxy(server.url, tmp_path / "log.db", app, server)


def _send(proxy: RunningProxy, api_key: str, kinds: tuple[str, ...]) -> None:
    """One request per kind of :data:`USAGE`, the same system prompt with a breakpoint."""
    rules = "Answer questions about Acme invoices briefly and cite the ledger. " * 200
    with anthropic.Anthropic(base_url=proxy.url, api_key=api_key) as client:
        for kind in kinds:
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system=[{"type": "text", "text": rules, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": kind}],
            )
    proxy.rows(len(kinds))


def _report(db: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["report", "--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.output


def _cents4(text: str) -> str:
    """An exact JSON amount at the table's 4 places, a half away from zero, as ``-$0.0023``."""
    amount = Decimal(text).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)
    return f"-${-amount}" if amount < 0 else f"${amount}"


def test_net_savings_round_the_exact_amount_not_the_float_sums_noise(
    proxy: RunningProxy, tmp_path: Path
) -> None:
    _send(proxy, "sk-ant-test-rounding-01", ("write", "miss"))

    data = json.loads(_report(proxy.db_path, "--format", "json"))
    total = data["total"]
    # $3/MTok input, $3.75 5m write, $15 output: 10 x 3 + 3,000 x 3.75 + 5 x 15, then 3,010 x 3 + 75
    assert Decimal(total["cost_usd"]) == Decimal("0.02046")
    assert Decimal(total["cost_without_cache_usd"]) == Decimal("0.01821")
    assert Decimal(total["net_savings_usd"]) == Decimal("-0.00225")
    assert Decimal(data["wasted_writes"]["premium_usd"]) == Decimal("0.00225")  # 3,000 x 0.75

    text = _report(proxy.db_path)
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in text.splitlines()
        if line.count("│") == 3
    }
    assert rows["Cost"] == _cents4(total["cost_usd"]) == "$0.0205"
    assert rows["Cost without cache"] == _cents4(total["cost_without_cache_usd"]) == "$0.0182"
    # the float difference of the two sums, -0.0022499999999999985, prints as -0.00225 does
    assert rows["Net savings (write premium included)"] == "-$0.0023", rows
    assert rows["Wasted writes (never read within TTL)"] == (
        "3,000 tokens in 1 request, $0.0023 premium"
    )
    advice = " ".join(text.split("Recommendations", 1)[1].split())
    assert "1 cache write (3,000 tokens, $0.0023 write premium) was never read" in advice, advice

    page = tmp_path / "report.html"
    _report(proxy.db_path, "--format", "html", "--output", str(page))
    headline = re.search(r'<section id="headline"(.*?)</section>', page.read_text(), re.S)
    assert headline is not None
    shown = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", headline.group(1))).split())
    assert "-$0.0023" in shown and "-$0.0022" not in shown, shown


def _alert(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["report", "--db", str(db), *args])
    alerts = [line for line in result.output.splitlines() if line.startswith("alert: ")]
    return result.exit_code, " ".join(alerts)


def test_an_alert_prints_the_figure_and_its_threshold_apart(proxy: RunningProxy) -> None:
    """An alert's two figures differ as printed: a cost of $0.02046 over a threshold of 0.02045
    is not "$0.0205 is over $0.0205", as both print at the table's 4 places."""
    _send(proxy, "sk-ant-test-rounding-02", ("write", "miss"))
    db = proxy.db_path
    assert Decimal(json.loads(_report(db, "--format", "json"))["total"]["cost_usd"]) == Decimal(
        "0.02046"
    )

    assert _alert(db, "--fail-over-cost", "0.02045") == (
        1,
        "alert: cost $0.02046 is over $0.02045",
    )
    assert _alert(db, "--fail-over-cost", "0.0204599") == (
        1,
        "alert: cost $0.0204600 is over $0.0204599",
    )
    assert _alert(db, "--fail-over-cost", "0.02") == (1, "alert: cost $0.0205 is over $0.0200")
    assert _alert(db, "--fail-over-cost", "0.02046") == (0, "")  # equal is not over

    # the hit rate of this window is 0 of 6,020 input tokens read from the cache
    assert _alert(db, "--fail-under-hit-rate", "0.0004") == (
        1,
        "alert: hit rate 0.0% is under <0.1%",
    )
    assert _alert(db, "--fail-under-hit-rate", "0.6") == (1, "alert: hit rate 0.0% is under 60.0%")


def test_a_hit_rate_alert_prints_the_rate_and_its_threshold_apart(proxy: RunningProxy) -> None:
    """A hit rate of 3,000 / 6,020 = 49.83% under a threshold of 0.4984 is not "49.8% is under
    49.8%", as both print at the table's one place."""
    _send(proxy, "sk-ant-test-rounding-03", ("miss", "read"))
    db = proxy.db_path
    total = json.loads(_report(db, "--format", "json"))["total"]
    assert (total["cache_read_tokens"], total["total_input_tokens"]) == (3000, 6020)
    assert _alert(db, "--fail-under-hit-rate", "0.4984") == (
        1,
        "alert: hit rate 49.83% is under 49.84%",
    )
    assert _alert(db, "--fail-under-hit-rate", "0.49834") == (
        1,
        "alert: hit rate 49.8339% is under 49.8340%",
    )
    assert _alert(db, "--fail-under-hit-rate", "0.6") == (1, "alert: hit rate 49.8% is under 60.0%")
    assert _alert(db, "--fail-under-hit-rate", "0.498") == (0, "")


def test_the_page_counts_one_break_in_the_singular(proxy: RunningProxy, tmp_path: Path) -> None:
    """The prompt strip's table counts one break as "character 0 (1 break)", not "(1 breaks)"."""
    rules = "Answer questions about Acme invoices briefly and cite the ledger. " * 200
    with anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-rounding-04") as client:
        for kind, system in (("write", rules), ("miss", "Changed. " + rules)):
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=16,
                system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": kind}],
            )
    proxy.rows(2)
    page = tmp_path / "report.html"
    _report(proxy.db_path, "--format", "html", "--output", str(page))
    strip = re.search(r'<table id="strip-segments"(.*?)</table>', page.read_text(), re.S)
    assert strip is not None
    row = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", strip.group(1))).split())
    assert "system[0] system" in row and "character 0 (1 break)" in row, row
