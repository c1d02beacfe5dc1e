"""`promptcache report` by replica, and several --db logs reported as one.

The numbers are checked against counts kept independently by the mock replicas (what each one
was sent and what usage it reported), and the merged report against the sum of the logs'
own reports.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fleet import PROMPT_TOKENS, FleetReplica, chat, rows_of, send

from promptcache.cli import cli
from promptcache.errors import ConfigError
from promptcache.proxy.report import build_report
from promptcache.proxy.report.html import render_html
from promptcache.proxy.report.page import build_page
from promptcache.proxy.report.render import render_table, replica_cells

TENANTS = ("A", "B", "C", "D", "E")


def _traffic(url: str, turns: int) -> None:
    for turn in range(turns):
        for tenant in TENANTS:
            assert send(url, chat(f"tenant {tenant}", *["q", "a"] * turn, "q")).status_code == 200


def _window() -> dict[str, float]:
    now = time.time()
    return {"since": now - 3600, "until": now + 3600, "now": now}


def test_the_report_shows_requests_and_hit_rate_by_replica_and_the_fleet_total(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    url, db, app = start_fleet_proxy(fleet)
    _traffic(url, turns=3)
    rows = rows_of(db, app, 15)
    report = build_report(db, **_window())
    by_url = {r.replica: r for r in report.replicas}
    total = by_url.pop(None)
    assert set(by_url) == {r.url for r in fleet}
    for replica in fleet:
        line = by_url[replica.url]
        assert line.upstream == "fleet"
        assert line.requests == len(replica.received)
        assert line.cache_read_tokens == replica.cached_tokens_sent
        assert line.total_input_tokens == replica.prompt_tokens_sent
        assert line.routed_new_prefix == len(set(replica.received))  # one per tenant it got
        assert line.routed_prefix == len(replica.received) - len(set(replica.received))
        assert line.share == pytest.approx(len(replica.received) / 15)
        # every request went to its prefix's holder: routed = available, no regret
        mine = [r for r in rows if r["replica"] == replica.url]
        assert line.available_tokens == sum(r["route_best_tokens"] for r in mine) > 0
        assert line.routed_tokens == line.available_tokens and line.regret_tokens == 0
    assert total.requests == 15 == report.total.requests
    assert total.total_input_tokens == 15 * PROMPT_TOKENS
    assert total.cache_read_tokens == sum(r.cached_tokens_sent for r in fleet)
    assert total.token_hit_rate == pytest.approx(report.total.token_hit_rate)
    mean = 15 / 3
    assert total.max_over_mean == pytest.approx(max(len(r.received) for r in fleet) / mean)
    text = render_table(report, width=200)
    assert "By replica" in text and "(fleet total)" in text and fleet[2].url in text
    assert "routed/avail" in text and "regret" in text  # "regret tok" on two header lines
    html = render_html(report)
    assert f'data-replica="{fleet[0].url}"' in html and 'class="fleet-total"' in html
    data = json.loads(CliRunner().invoke(cli, ["report", "--db", str(db), "--format", "json"])
                      .output)  # fmt: skip
    assert [r["requests"] for r in data["replicas"]] == [r.requests for r in report.replicas]


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded"])
def test_a_policy_that_matches_no_prefix_shows_no_regret_rather_than_zero(
    policy: str,
    fleet: list[FleetReplica],
    start_fleet_proxy: Callable[..., tuple[str, Path, Any]],
) -> None:
    # round_robin never asks which replica holds a prompt: its regret is unknown, and a 0
    # beside the prefix policy's (the docs compare policies by it) would read as the better one
    url, db, app = start_fleet_proxy(fleet, policy=policy)
    _traffic(url, turns=2)
    rows = rows_of(db, app, 10)
    assert {r["route_reason"] for r in rows} == {policy}
    assert {(r["route_best_tokens"], r["route_chosen_tokens"]) for r in rows} == {(None, None)}
    metrics = httpx.get(f"{url}/metrics").text
    assert f'promptcache_routed_total{{reason="{policy}",replica="{fleet[0].url}"' in metrics
    assert "promptcache_route_regret_tokens_total{" not in metrics
    assert "promptcache_route_available_tokens_total{" not in metrics
    report = build_report(db, **_window())
    for line in report.replicas:
        assert replica_cells(line)[-2:] == ["n/a", "n/a"], line
    # a prefix fleet's replica that held nothing of its requests still shows both as n/a, and
    # one whose requests found their prefix shows its (zero) regret
    url, db, app = start_fleet_proxy(fleet)
    _traffic(url, turns=2)
    rows_of(db, app, 10)
    metrics = httpx.get(f"{url}/metrics").text
    assert f'promptcache_route_regret_tokens_total{{replica="{fleet[0].url}"' in metrics
    cells = [replica_cells(line)[-2:] for line in build_report(db, **_window()).replicas]
    assert ["100.0%", "0"] in cells


def test_the_command_line_table_keeps_each_replica_url_on_one_line(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # `promptcache report` prints 120 characters wide: the 14 by-replica columns in one table
    # folded each URL into 5-character pieces (http: / //127 / .0.0. / 1:800 / 1)
    url, db, app = start_fleet_proxy(fleet)
    _traffic(url, turns=1)
    rows_of(db, app, 5)
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--since", "1h"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 120
    start = lines.index(next(line for line in lines if line.startswith("By replica")))
    table = lines[start : lines.index(next(line for line in lines if line.startswith("No cache")))]
    for replica in fleet:
        count = len(replica.received)
        # the URL whole, with its requests (first table) and its new prefixes (second)
        mine = [line.split("│") for line in table if f" {replica.url} " in line]
        assert len(mine) == 2, "\n".join(table)
        assert mine[0][3].strip() == mine[1][4].strip() == str(count), "\n".join(table)
    assert sum("(fleet total)" in line for line in table) == 2
    assert [line.rstrip() for line in table if line.startswith("By replica")] == [
        "By replica",
        "By replica: routing",
    ]


def test_several_db_files_report_as_one_and_add_up(
    fleet: list[FleetReplica], start_fleet_proxy: Callable[..., tuple[str, Path, Any]]
) -> None:
    # two proxies in front of the same fleet, each with its own log (as behind a balancer)
    url_a, db_a, app_a = start_fleet_proxy(fleet[:2])
    url_b, db_b, app_b = start_fleet_proxy(fleet[1:])
    _traffic(url_a, turns=2)
    _traffic(url_b, turns=1)
    rows_of(db_a, app_a, 10)
    rows_of(db_b, app_b, 5)
    window = _window()
    a, b = build_report(db_a, **window), build_report(db_b, **window)
    both = build_report([db_a, db_b], **window)
    assert both.db == f"{db_a} + {db_b}"
    summed = ("requests", "requests_with_usage", "hit_requests", "cache_read_tokens",
              "total_input_tokens", "uncached_input_tokens", "output_tokens", "errors")  # fmt: skip
    for field in summed:
        assert getattr(both.total, field) == getattr(a.total, field) + getattr(b.total, field)
    assert both.total.requests == 15
    assert both.total.cache_read_tokens == sum(r.cached_tokens_sent for r in fleet)
    # the shared replica's rows from both logs land on one line
    shared = [r for r in both.replicas if r.replica == fleet[1].url]
    assert len(shared) == 1 and shared[0].requests == len(fleet[1].received)
    result = CliRunner().invoke(
        cli, ["report", "--db", str(db_a), "--db", str(db_b), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["total"]["requests"] == 15
    # the HTML page of several logs reads them merged too (its charts, families, strip)
    page = build_page(both)
    assert sum(bucket.requests for bucket in page.timeline.buckets) == 15
    assert sum(f.requests for f in page.families) == 15 and page.more_families == 0
    html = render_html(both)
    assert '<span id="requests">15</span>' in html and f"<code>{db_a} + {db_b}</code>" in html


def test_the_same_log_twice_is_refused(tmp_path: Path) -> None:
    from promptcache.proxy.store import open_log

    log = tmp_path / "a.db"
    open_log(log).close()
    with pytest.raises(ConfigError, match="given twice"):
        build_report([log, tmp_path / "." / "a.db"], **_window())
    result = CliRunner().invoke(cli, ["report", "--db", str(log), "--db", str(log)])
    assert result.exit_code == 2 and "given twice" in result.output


def test_a_link_to_a_log_given_beside_it_is_named_as_the_same_file(tmp_path: Path) -> None:
    from promptcache.proxy.store import open_log

    log = tmp_path / "a.db"
    open_log(log).close()
    symlink = tmp_path / "link-to-a.db"
    symlink.symlink_to(log)
    hard = tmp_path / "hard-a.db"
    os.link(log, hard)
    for other in (symlink, hard):
        expected = f"--db {log} and --db {other} name the same file ({log.resolve()}); "
        with pytest.raises(ConfigError) as raised:
            build_report([log, other], **_window())
        assert str(raised.value) == expected + "give each log once"
        result = CliRunner().invoke(cli, ["report", "--db", str(log), "--db", str(other)])
        assert result.exit_code == 2 and expected in result.output
        assert "given twice" not in result.output


def test_a_version_4_log_gains_the_routing_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    from sqlite_utils import Database

    from promptcache.proxy.replica_rollup import ROUTING_COLUMNS
    from promptcache.proxy.store import MIGRATIONS, open_log

    path = tmp_path / "old.db"
    db = Database(path)
    db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    for version, step in enumerate(MIGRATIONS[:4], 1):
        step(db)
        db.execute("INSERT INTO schema_version VALUES (?, 0)", [version])
    started = time.time() - 60
    db["requests"].insert(
        {"id": "old-1", "started_at": started, "stream": 0, "total_input_tokens": 10,
         "cache_read_tokens": 4, "status": 200},
    )  # fmt: skip
    db.conn.commit()
    db.close()
    migrated = open_log(path)
    try:
        columns = migrated["requests"].columns_dict
        assert all(name in columns for name, _ in ROUTING_COLUMNS)
        assert migrated.execute("SELECT id, replica FROM requests").fetchall() == [("old-1", None)]
        migrated["requests"].insert(
            {"id": "new-1", "started_at": started + 1, "stream": 0, "upstream": "fleet",
             "replica": "http://r1", "route_reason": "prefix", "total_input_tokens": 10,
             "cache_read_tokens": 8, "status": 200},
        )  # fmt: skip
        migrated.conn.commit()
    finally:
        migrated.close()
    report = build_report(path, **_window())
    assert report.total.requests == 2 and report.total.cache_read_tokens == 12
    (line, total) = report.replicas  # only the routed row has a replica
    assert (line.replica, line.requests, line.routed_prefix, line.cache_read_tokens) == (
        "http://r1", 1, 1, 8,
    )  # fmt: skip
    assert total.replica is None and total.requests == 1
    # deleting a routed row takes it back out of the replica rollup
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM requests WHERE id = 'new-1'")
    assert build_report(path, **_window()).replicas == ()
