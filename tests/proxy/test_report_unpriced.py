"""A window, or a group, whose every request has a model without a price row shows no dollar
figure: its cost is unknown, not $0.

A proxy under uvicorn on 127.0.0.1 in front of the mock upstream (tests/proxy/upstreams.py), the
official ``openai`` client sending a self-hosted model name and a priced one, a real SQLite log,
then ``promptcache report`` as text and HTML.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

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
