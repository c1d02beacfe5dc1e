"""A window, or a group, whose every request has a model without a price row shows no dollar
figure: its cost is unknown, not $0.

A proxy under uvicorn on 127.0.0.1 in front of the mock upstream (tests/proxy/upstreams.py), the
official ``openai`` client sending a self-hosted model name and a priced one, a real SQLite log,
then ``promptcache report`` as text and HTML.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path

import anthropic
import openai
from click.testing import CliRunner
from proxy_support import RunningProxy

from promptcache.cli import cli

UNKNOWN = "n/a (unpriced)"


def _report(db: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["report", "--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.output


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_cost_of_only_unpriced_requests_is_not_shown_as_zero_dollars(
    start_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    proxy = start_proxy()
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-unpriced-0123")
    rules = "Answer questions about Acme orders briefly and cite the order database. " * 20
    for i in range(2):  # a time in the system prompt: the second request is a break
        client.chat.completions.create(
            model="my-finetune",
            messages=[
                {"role": "system", "content": f"Time: 09:0{i}. {rules}"},
                {"role": "user", "content": "Where is order 17?"},
            ],
        )
    proxy.rows(2)
    text = _report(proxy.db_path)
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in text.splitlines()
        if line.count("│") == 3
    }
    assert rows["Cost"] == rows["Cost without cache"] == UNKNOWN, rows
    assert rows["Net savings (write premium included)"] == UNKNOWN
    assert rows["Unpriced requests (not in cost)"] == "2"
    assert rows["Wasted writes (never read within TTL)"].endswith(f"{UNKNOWN} premium")
    reason = next(line for line in text.splitlines() if "system_changed" in line)
    assert "n/a" in reason and "$" not in reason, reason  # $ lost
    page = tmp_path / "unpriced.html"
    _report(proxy.db_path, "--format", "html", "--output", str(page))
    headline = re.search(r'<section id="headline"(.*?)</section>', page.read_text(), re.S)
    assert headline is not None
    assert "$" not in _text(headline.group(1)), _text(headline.group(1))
    assert "Caching saved n/a (unpriced) no priced traffic in this window" in _text(
        headline.group(1)
    )

    # a priced model beside it: the window has a cost, the unpriced group still none
    client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is order 17?"}]
    )
    proxy.rows(3)
    grouped = _report(proxy.db_path, "--group-by", "model")
    lines = {line.split("│")[1].strip(): line for line in grouped.splitlines() if "│" in line}
    assert UNKNOWN not in lines["Cost"] and "$" in lines["Cost"]
    # cost and savings (the narrow column folds "(unpriced)" onto the next line)
    assert lines["my-finetune"].count("n/a") == 2 and "$" not in lines["my-finetune"]
    assert UNKNOWN not in lines["gpt-4o"]
    out = tmp_path / "report.html"
    _report(proxy.db_path, "--group-by", "model", "--format", "html", "--output", str(out))
    groups = re.search(r'<table id="groups">(.*?)</table>', out.read_text(), re.S)
    assert groups is not None
    row = next(r for r in groups.group(1).split("<tr>") if "my-finetune" in r)
    assert _text(row).count(UNKNOWN) == 3  # cost, cost without cache, savings


def test_breaks_and_writes_of_an_unpriced_model_beside_priced_traffic_show_no_dollars(
    start_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    """A window with priced traffic has a cost, but the break reason and the wasted writes
    that only an unpriced model caused have unknown dollars, not $0.0000."""
    proxy = start_proxy()
    anthropic_client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-ant-test-unpriced-01")
    rules = "Answer questions about Acme orders briefly and cite the order database. " * 20
    for i in range(2):  # a 1h write, then a break that reads none of it: both wasted
        anthropic_client.messages.create(
            model="claude-custom-1",
            max_tokens=64,
            system=[
                {"type": "text", "text": rules},
                {
                    "type": "text",
                    "text": f"Time: 09:0{i}.",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"},
                },
            ],
            messages=[{"role": "user", "content": "Where is order 17?"}],
            extra_headers={"x-mock-case": "cache_write_1h"},
        )
    openai_client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-unpriced-0123")
    openai_client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is order 17?"}]
    )
    proxy.rows(3)
    text = _report(proxy.db_path)
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in text.splitlines()
        if line.count("│") == 3
    }
    assert rows["Cost"].startswith("$"), rows  # gpt-4o is priced
    assert rows["Unpriced requests (not in cost)"] == "2"
    wasted = rows["Wasted writes (never read within TTL)"]
    assert wasted == f"188,086 tokens in 1 request, {UNKNOWN} premium", wasted
    reason = next(line for line in text.splitlines() if "system_changed" in line)
    assert "n/a" in reason and "$" not in reason, reason  # $ lost
    advice = " ".join(text.split("Recommendations", 1)[1].split())
    assert "$0.0000" not in advice, advice
    assert "(system_changed, 1 break, 188,086 tokens lost;" in advice, advice
    assert "1 cache write (188,086 tokens) was never read" in advice, advice
    data = json.loads(_report(proxy.db_path, "--format", "json"))
    assert data["wasted_writes"] == {
        "tokens": 188086,
        "requests": 1,
        "premium_usd": "0",
        "unpriced_requests": 1,
    }
    (reason_json,) = data["break_reasons"]
    assert (reason_json["breaks"], reason_json["unpriced_breaks"]) == (1, 1), reason_json

    page = tmp_path / "report.html"
    _report(proxy.db_path, "--format", "html", "--output", str(page))
    document = page.read_text()
    row = re.search(r'<tr data-reason="system_changed">(.*?)</tr>', document, re.S)
    assert row is not None
    assert UNKNOWN in _text(row.group(1)) and "$" not in _text(row.group(1)), _text(row.group(1))
    left = re.search(r'<div class="card" id="left">(.*?)</div></div>', document, re.S)
    assert left is not None
    assert _text(left.group(1)).startswith(f"Left on the table {UNKNOWN} 188,086 input tokens")
