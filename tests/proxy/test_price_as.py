"""`price_as`: a self-hosted model's traffic priced at a named model's rates, end to end.

A real proxy on 127.0.0.1 in front of the mock upstream, a real SQLite log, the real report, the
real CLI; plus a log written by schema version 3 migrated in place.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from proxy_support import RunningProxy, log_at_version

from promptcache.cli import cli
from promptcache.errors import ConfigError
from promptcache.pricing import cost
from promptcache.proxy.config import UpstreamConfig, config_for_upstream, config_from_dict
from promptcache.proxy.report import build_report
from promptcache.proxy.report.html import render_html
from promptcache.proxy.report.render import render_table
from promptcache.proxy.store import SCHEMA_VERSION, open_log
from promptcache.usage import parse_usage

ENGINE_MODEL = "tinystories-656k"


def _chat(proxy: RunningProxy, model: str) -> dict[str, object]:
    body = {"model": model, "messages": [{"role": "user", "content": "Once upon a time"}]}
    response = httpx.post(f"{proxy.url}/v1/chat/completions", json=body, timeout=10)
    assert response.status_code == 200, response.text
    payload: dict[str, object] = response.json()
    return payload


def test_unpriced_model_is_priced_as_the_named_model_and_priced_models_keep_their_own(
    start_proxy: Callable[..., RunningProxy], mock_server: object
) -> None:
    url = mock_server.url  # type: ignore[attr-defined]
    upstream = UpstreamConfig(name="openai", url=url, vendor="openai", price_as="gpt-5")
    proxy = start_proxy(upstreams={"openai": upstream})
    engine_payload = _chat(proxy, ENGINE_MODEL)
    own_payload = _chat(proxy, "gpt-4o")
    engine_row, own_row = proxy.rows(2)

    usage = parse_usage("openai_chat", engine_payload)
    assert usage.cache_read_tokens > 0  # the case under test has cache reads
    expected = cost(usage, "gpt-5")
    assert engine_row["model"] == ENGINE_MODEL
    assert engine_row["priced_as"] == "gpt-5"
    assert Decimal(engine_row["cost_usd"]) == expected.total_usd
    assert Decimal(engine_row["cost_without_cache_usd"]) == expected.cost_without_cache_usd

    own = cost(parse_usage("openai_chat", own_payload), "gpt-4o")
    assert own_row["priced_as"] is None
    assert Decimal(own_row["cost_usd"]) == own.total_usd
    assert own.total_usd != cost(parse_usage("openai_chat", own_payload), "gpt-5").total_usd

    # the report counts the priced-as cost, and says which rates it used
    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.unpriced_requests == 0
    assert report.total.cost_usd == pytest.approx(float(expected.total_usd + own.total_usd))
    assert [(p.model, p.priced_as, p.requests) for p in report.priced_as] == [
        (ENGINE_MODEL, "gpt-5", 1)
    ]
    note = f"1 request for {ENGINE_MODEL} (no price row) is priced at gpt-5's rates"
    assert note in render_table(report, width=200)
    assert note.replace("'", "&#39;") in render_html(report)
    assert "--price-as MODEL" not in render_table(report, width=200)
    runner = CliRunner()
    result = runner.invoke(cli, ["report", "--db", str(proxy.db_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["priced_as"] == [
        {"model": ENGINE_MODEL, "priced_as": "gpt-5", "requests": 1}
    ]
    result = runner.invoke(
        cli, ["report", "--db", str(proxy.db_path), "--format", "csv", "--group-by", "model"]
    )
    assert result.exit_code == 0, result.output
    rows = {row["group"]: row for row in csv.DictReader(io.StringIO(result.output))}
    assert rows[ENGINE_MODEL]["priced_as"] == f"{ENGINE_MODEL}=gpt-5"
    assert rows["gpt-4o"]["priced_as"] == ""
    assert rows["(total)"]["priced_as"] == f"{ENGINE_MODEL}=gpt-5"


def test_without_price_as_an_unpriced_model_stays_unpriced(
    start_proxy: Callable[..., RunningProxy],
) -> None:
    proxy = start_proxy()
    _chat(proxy, ENGINE_MODEL)
    row = proxy.row()
    assert row["cost_usd"] is None and row["priced_as"] is None
    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert report.total.unpriced_requests == 1 and report.priced_as == ()
    # its cost is no $0: the table and the page say it is left out, and how to price it
    note = (
        "1 request is unpriced (no price row for the model) and in no cost or $ figure; a proxy "
        "started with --price-as MODEL prices such requests at MODEL's rates (docs/proxy.md)"
    )
    assert f"* {note}" in render_table(report, width=300)
    assert note.replace("'", "&#39;") in render_html(report)
    _chat(proxy, ENGINE_MODEL)
    proxy.rows(2)
    report = build_report(proxy.db_path, since=time.time() - 3600, until=time.time() + 60)
    assert "* 2 requests are unpriced (no price row" in render_table(report, width=300)


def test_price_as_flag_fills_only_upstreams_without_their_own() -> None:
    data = {
        "default_upstream": "local",
        "upstreams": {
            "local": {"url": "http://127.0.0.1:8000", "vendor": "engine"},
            "vllm": {"url": "http://127.0.0.1:8001", "price_as": "claude-sonnet-4-5"},
        },
    }
    config = config_from_dict(data, source="t.toml").with_price_as("gpt-5")
    assert config.upstreams["local"].price_as == "gpt-5"
    assert config.upstreams["vllm"].price_as == "claude-sonnet-4-5"
    assert config_for_upstream("engine").with_price_as(None).upstreams["engine"].price_as is None


@pytest.mark.parametrize("value", ["gpt-55", 5, ""])
def test_unknown_or_wrong_price_as_in_the_config_is_a_config_error(value: object) -> None:
    data = {"default_upstream": "x", "upstreams": {"x": {"url": "http://h:1", "price_as": value}}}
    with pytest.raises(ConfigError, match=r"\[upstreams\.x\].*price_as") as info:
        config_from_dict(data, source="t.toml")
    if value == "gpt-55":
        assert "close matches: gpt-5.5, gpt-5" in str(info.value)


def test_cli_rejects_an_unknown_price_as_before_listening(tmp_path: Path) -> None:
    launcher = "from promptcache.cli import cli; cli()"
    command = [sys.executable, "-c", launcher, "proxy", "--upstream", "engine"]
    done = subprocess.run(
        [*command, "--price-as", "gpt-55", "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "error: --price-as: price_as 'gpt-55' has no row" in done.stderr
    assert "close matches: gpt-5.5, gpt-5" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()


def test_a_version_3_log_migrates_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = log_at_version(path, 3)
    hour = time.time() - 600
    db["requests"].insert(
        {"id": "old-1", "started_at": hour, "stream": 0, "model": "gpt-4o", "cost_usd": "0.01"}
    )
    db.conn.commit()
    db.close()

    migrated = open_log(path)
    try:
        versions = [r[0] for r in migrated.execute("SELECT version FROM schema_version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1)) and SCHEMA_VERSION >= 4
        assert "priced_as" in migrated["requests"].columns_dict
        row = migrated.execute("SELECT id, cost_usd, priced_as FROM requests").fetchall()
        assert row == [("old-1", "0.01", None)]
        migrated["requests"].insert(
            {"id": "new-1", "started_at": hour + 1, "stream": 0, "priced_as": "gpt-5"}
        )
    finally:
        migrated.close()
    with closing(sqlite3.connect(path)) as conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(requests)")}
    assert "idx_requests_priced_as" in indexes
    report = build_report(path, since=hour - 3600, until=hour + 3600)
    assert report.total.requests == 2
