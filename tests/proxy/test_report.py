"""The report over hand-built logs: rollups vs the raw rows, windows, waste, advice, errors.

Rows go into real SQLite logs created by the proxy's own migrations; the triggers keep the
rollups. The live-proxy path (and the CLI) is covered in test_breaks_e2e.py.
"""

from __future__ import annotations

import html
import sqlite3
import time
from collections import defaultdict
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from promptcache.errors import ConfigError
from promptcache.formatting import percent
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import build_report
from promptcache.proxy.report.advice import (
    EngineKvStats,
    Recommendation,
    recommend,
)
from promptcache.proxy.report.html import render_html
from promptcache.proxy.report.render import render_csv, render_table, summary_rows
from promptcache.proxy.rollup import ROLLUP_TABLES
from promptcache.proxy.store import MIGRATIONS, migrate, open_log

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC


def row(rid: str, at: float, **values: Any) -> dict[str, Any]:
    """A successful request row with the given columns (the rest NULL)."""
    out = dict.fromkeys(COLUMN_NAMES)
    out.update(id=rid, started_at=at, stream=0, status=200, vendor="anthropic", api="anthropic")
    out.update(values)
    return out


def usage(read: int = 0, w5: int = 0, w1: int = 0, wu: int = 0, uncached: int = 10) -> dict:
    return {
        "uncached_input_tokens": uncached,
        "cache_read_tokens": read,
        "cache_write_5m_tokens": w5,
        "cache_write_1h_tokens": w1,
        "cache_write_unknown_tokens": wu,
        "output_tokens": 5,
        "reasoning_tokens": 0,
        "total_input_tokens": uncached + read + w5 + w1 + wu,
    }


def write_log(path: Path, rows: list[dict[str, Any]]) -> Path:
    db = open_log(path)
    with db.conn:
        db.table("requests").insert_all(rows)
    db.close()
    return path


# ---------------------------------------------------------------- rollups = the raw rows


_nullable_int = st.one_of(st.none(), st.integers(0, 5000))
_rows = st.lists(
    st.fixed_dictionaries(
        {
            "hour": st.integers(0, 3),
            "second": st.floats(0, 3599, allow_nan=False),
            "model": st.sampled_from([None, "claude-sonnet-4-5", "gpt-4o"]),
            "route": st.sampled_from([None, "/v1/messages"]),
            "vendor": st.sampled_from(["anthropic", "engine", None]),
            "status": st.sampled_from([200, 200, 200, 400, 529, 0, None]),
            "read": _nullable_int,
            "w5": st.integers(0, 3000),
            "w1": st.integers(0, 3000),
            "ttft": st.one_of(st.none(), st.floats(1, 5000, allow_nan=False)),
            "reason": st.sampled_from([None, None, "system_changed", "ttl_expired"]),
            "prev": st.one_of(st.none(), st.integers(0, 30)),
            "cost": st.one_of(st.none(), st.decimals(0, 5, places=6).map(str)),
            "unexpected": st.sampled_from([None, 0, 1]),
        }
    ),
    max_size=30,
)


def _hypothesis_rows(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for i, s in enumerate(specs):
        values: dict[str, Any] = {
            "model": s["model"], "route": s["route"], "vendor": s["vendor"],
            "status": s["status"], "ttft_ms": s["ttft"], "break_reason": s["reason"],
            "break_segment": "system[0]" if s["reason"] == "system_changed" else None,
            "cost_usd": s["cost"], "unexpected_miss": s["unexpected"],
            "first_segment_hash": "f", "key_fingerprint": "k",
            # the proxy writes rows in completion order: a predecessor is always written first
            "previous_request_id": f"r{s['prev']}" if s["prev"] is not None and s["prev"] < i
            else None,
        }  # fmt: skip
        if s["read"] is not None:  # usage present
            values.update(usage(read=s["read"], w5=s["w5"], w1=s["w1"]))
        rows.append(row(f"r{i}", T0 + s["hour"] * 3600 + s["second"], **values))
    return rows


def _reference(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, float]]:
    """report_hourly's additive columns worked out in plain Python."""
    out: dict[tuple[Any, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        key = (int(r["started_at"] // 3600), r["model"] or "", r["route"] or "", "k",
               r["vendor"] or "")  # fmt: skip
        acc = out[key]
        total = r["total_input_tokens"]
        status = r["status"]
        acc["requests"] += 1
        acc["requests_with_usage"] += total is not None
        acc["cache_read_tokens"] += r["cache_read_tokens"] or 0
        acc["total_input_tokens"] += total or 0
        acc["hit_ratio_sum"] += (r["cache_read_tokens"] / total) if total else 0.0
        acc["cost_usd"] += float(r["cost_usd"] or 0)
        acc["unpriced_requests"] += r["cost_usd"] is None and total is not None
        acc["errors"] += status is None or status == 0 or status >= 400
        acc["breaks"] += r["break_reason"] is not None
        acc["unexpected_misses"] += r["unexpected_miss"] == 1
        ok = status is not None and 200 <= status < 400 and r["ttft_ms"] is not None
        acc["ttft_hit_requests"] += ok and (r["cache_read_tokens"] or 0) > 0
        acc["ttft_miss_requests"] += ok and r["cache_read_tokens"] == 0
    return {k: dict(v) for k, v in out.items()}


def _rounded(value: Any) -> Any:
    """Floats rounded to 6 places, recursively (sums of floats depend on their order)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(v) for v in value)
    return value


def _rollup(db: Database, columns: list[str]) -> dict[tuple[Any, ...], dict[str, float]]:
    keys = "hour, model, route, key_fingerprint, vendor"
    sql = f"SELECT {keys}, requests, {', '.join(columns)} FROM report_hourly"
    return {
        tuple(r[:5]): dict(zip(columns, r[6:], strict=True))
        for r in db.execute(sql).fetchall()
        if r[5]  # a group emptied by deletes keeps a row of zeros
    }


def _v1_log() -> Database:
    """An in-memory log at schema version 1 (before the rollups existed)."""
    db = Database(memory=True)
    db.conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    MIGRATIONS[0](db)
    db.conn.execute("INSERT INTO schema_version VALUES (1, 0)")
    db.conn.commit()
    return db


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(_rows, st.data())
def test_rollups_equal_the_rows_whether_kept_by_triggers_or_backfilled(
    specs: list[dict[str, Any]], data: st.DataObject
) -> None:
    rows = _hypothesis_rows(specs)
    live = Database(memory=True)
    migrate(live)  # rollups first, then rows: the triggers keep them
    live.table("requests").insert_all(rows)
    late = _v1_log()  # rows first, then the migration: the backfill fills them
    v1_columns = late.table("requests").columns_dict  # later steps add columns (priced_as)
    late.table("requests").insert_all([{k: r[k] for k in r if k in v1_columns} for r in rows])
    migrate(late)
    for table, order in [
        ("report_hourly", "hour, model, route, key_fingerprint, vendor"),
        ("report_breaks_hourly", "hour, reason, model, segment"),
        ("report_family_hourly", "hour, key_fingerprint, model, prefix_family"),
    ]:
        sql = f"SELECT * FROM {table} ORDER BY {order}"
        assert _rounded(live.execute(sql).fetchall()) == _rounded(late.execute(sql).fetchall())

    columns = [
        "requests_with_usage", "cache_read_tokens", "total_input_tokens", "hit_ratio_sum",
        "cost_usd", "unpriced_requests", "errors", "breaks", "unexpected_misses",
        "ttft_hit_requests", "ttft_miss_requests",
    ]  # fmt: skip
    expected = {k: {c: v.get(c, 0) for c in columns} for k, v in _reference(rows).items()}
    assert _rounded(_rollup(live, columns)) == _rounded(expected)

    doomed = data.draw(st.sets(st.sampled_from([r["id"] for r in rows]))) if rows else set()
    with live.conn:
        for rid in doomed:
            live.conn.execute("DELETE FROM requests WHERE id = ?", (rid,))
    remaining = [r for r in rows if r["id"] not in doomed]
    expected = {k: {c: v.get(c, 0) for c in columns} for k, v in _reference(remaining).items()}
    assert _rounded(_rollup(live, columns)) == _rounded(expected)


# ---------------------------------------------------------------- windows, groups, waste


def test_window_is_exact_and_groups_split_it(tmp_path: Path) -> None:
    log = write_log(
        tmp_path / "log.db",
        [
            row("a", T0 + 10, model="m1", route="/v1/messages", **usage(read=90)),
            row("b", T0 + 3605, model="m2", route="/v1/chat/completions", **usage(w5=90)),
            row("c", T0 + 7205, model="m1", **usage()),
        ],
    )  # fmt: skip
    report = build_report(log, since=T0 + 1800, until=T0 + 3606, now=T0 + 99999)
    # [09:30, 10:00:06) is not widened: row b only (a is at 09:00:10)
    assert (report.since, report.until) == (T0 + 1800, T0 + 3606)
    assert report.total.requests == 1 and report.total.cache_write_5m_tokens == 90
    assert report.total.cache_read_tokens == 0
    by_model = build_report(log, since=T0, until=T0 + 3 * 3600, group_by="model", now=T0 + 99999)
    assert [(g.group, g.requests) for g in by_model.groups] == [("m1", 2), ("m2", 1)]
    by_hour = build_report(log, since=T0, until=T0 + 3 * 3600, group_by="hour", now=T0 + 99999)
    assert [g.group for g in by_hour.groups] == [
        "2025-11-30 09:00",
        "2025-11-30 10:00",
        "2025-11-30 11:00",
    ]
    by_route = build_report(log, since=T0, until=T0 + 3 * 3600, group_by="route", now=T0 + 99999)
    assert {g.group for g in by_route.groups} == {"/v1/messages", "/v1/chat/completions", "(none)"}
    assert [p.hit_rate for p in by_hour.timeline] == [
        pytest.approx(90 / 100),
        pytest.approx(0.0),
        pytest.approx(0.0),
    ]


def test_a_new_prefix_is_counted_apart_from_the_breaks_in_every_group(tmp_path: Path) -> None:
    # Each group's breaks + new prefixes = its rows with a break_reason, counted by hand here.
    rows = [
        row("a", T0 + 10, model="m1", route="/r1", break_reason="new_prefix", **usage(w5=90)),
        row("b", T0 + 20, model="m1", route="/r1", break_reason="system_changed",
            break_segment="system[0].text", **usage(w5=90)),
        row("c", T0 + 30, model="m2", route=None, break_reason="new_prefix", **usage(w5=90)),
        row("d", T0 + 3605, model="m2", route="/r1", **usage(read=90)),
        row("e", T0 + 3610, model="m1", route="/r1", break_reason="new_prefix", **usage()),
    ]  # fmt: skip
    log = write_log(tmp_path / "log.db", rows)
    window = {"since": T0, "until": T0 + 2 * 3600, "now": T0 + 99999}
    total = build_report(log, **window)
    assert (total.total.breaks, total.total.new_prefixes) == (1, 3)
    assert [b.reason for b in total.break_reasons] == ["system_changed"]
    summary = dict(summary_rows(total.total, total))
    assert summary["Cache breaks"] == "1"
    assert summary["New prefixes (first request of a prefix, not a break)"] == "3"
    for group_by, key in (("model", "model"), ("route", "route"), ("hour", None)):
        report = build_report(log, group_by=group_by, **window)
        got = {g.group: (g.breaks, g.new_prefixes) for g in report.groups}
        expected: dict[str | None, list[int]] = {}
        for r in rows:
            if key is None:
                hour = int(r["started_at"] // 3600) * 3600
                grp = time.strftime("%Y-%m-%d %H:00", time.gmtime(hour))
            else:
                grp = r[key] or "(none)"
            counts = expected.setdefault(grp, [0, 0])
            counts[0] += r["break_reason"] not in (None, "new_prefix")
            counts[1] += r["break_reason"] == "new_prefix"
        assert got == {g: tuple(c) for g, c in expected.items()}, group_by
    assert "new_prefixes" in render_csv(total).splitlines()[0].split(",")


def test_writes_still_within_their_ttl_are_not_wasted_yet(tmp_path: Path) -> None:
    family = {"key_fingerprint": "k", "model": "claude-sonnet-4-5", "first_segment_hash": "f"}
    log = write_log(
        tmp_path / "log.db",
        [
            row("w1", T0, **family, **usage(w5=1000)),
            row("r1", T0 + 60, **family, previous_request_id="w1", **usage(read=1000)),
            row("w2", T0 + 120, **family, previous_request_id="r1", **usage(w1=500)),
        ],
    )
    # at T0 + 200: w1 was read back; w2's 1h write has no successor and is still live
    fresh = build_report(log, since=T0, until=T0 + 3600, now=T0 + 200)
    assert fresh.wasted_writes.tokens == 0
    # two hours later nobody has read it: wasted, and its premium is priced (1h: 6 - 3 $/MTok)
    later = build_report(log, since=T0, until=T0 + 3600, now=T0 + 7200)
    assert (later.wasted_writes.tokens, later.wasted_writes.requests) == (500, 1)
    assert later.wasted_writes.premium_usd == pytest.approx(500 * 3 / 1e6)


def test_an_expired_write_without_a_successor_counts_its_request_within_the_hour(
    tmp_path: Path,
) -> None:
    # the last write of its family, never read: past its 5 minutes it is wasted, tokens and
    # request alike, also in the hour after it (when it was still in the pending query's range)
    family = {"key_fingerprint": "k", "model": "claude-sonnet-4-5", "first_segment_hash": "f"}
    log = write_log(tmp_path / "log.db", [row("w1", T0, **family, **usage(w5=1000))])
    for now, expected in ((T0 + 200, (0, 0)), (T0 + 600, (1000, 1)), (T0 + 7200, (1000, 1))):
        wasted = build_report(log, since=T0, until=T0 + 3600, now=now).wasted_writes
        assert (wasted.tokens, wasted.requests) == expected, now - T0


def test_a_write_followed_only_by_failed_requests_is_still_pending(tmp_path: Path) -> None:
    # the explainer chains successful requests only: a 529 (or a client gone, no status) after
    # the last write reads nothing back, so that write is no more wasted than with no successor
    family = {"key_fingerprint": "k", "model": "claude-sonnet-4-5", "first_segment_hash": "f"}
    log = write_log(
        tmp_path / "log.db",
        [
            row("w1", T0, **family, **usage(w5=1000)),
            row("e1", T0 + 30, **family, status=529, error="upstream answered 529: Overloaded"),
            row("e2", T0 + 40, **family, status=None, error="client disconnected"),
        ],
    )
    fresh = build_report(log, since=T0, until=T0 + 3600, now=T0 + 200).wasted_writes
    assert (fresh.tokens, fresh.requests) == (0, 0)
    later = build_report(log, since=T0, until=T0 + 3600, now=T0 + 600).wasted_writes
    assert (later.tokens, later.requests) == (1000, 1)


def test_counts_of_one_take_the_singular_in_the_summary_and_the_advice(tmp_path: Path) -> None:
    # one wasted write, one TTL expiry, one unexpected miss: '1 request', 'was', 'its'
    family = {"key_fingerprint": "k", "model": "claude-sonnet-4-5", "first_segment_hash": "f"}
    log = write_log(
        tmp_path / "log.db",
        [
            row("w1", T0, **family, **usage(w5=1000, uncached=100)),
            row("x1", T0 + 900, **family, previous_request_id="w1", break_reason="ttl_expired",
                **usage(uncached=1100)),
            row("m1", T0 + 910, **family, previous_request_id="x1", unexpected_miss=1,
                **usage(uncached=1100)),
        ],
    )  # fmt: skip
    report = build_report(log, since=T0, until=T0 + 3600, now=T0 + 3600)
    wasted = dict(summary_rows(report.total, report))["Wasted writes (never read within TTL)"]
    assert wasted.startswith("1,000 tokens in 1 request, $")
    advice = " ".join(r.message for r in report.recommendations)
    assert "1 cache write (1,000 tokens, $0.0008 write premium) was never read within its TTL" in (
        advice
    )
    assert "1 request came after its prefix's TTL ran out" in advice
    assert "1 request sent an unchanged prefix within the TTL" in advice
    assert " 1 requests " not in advice and " were never" not in advice


def test_the_requests_line_splits_by_usage_and_counts_errors_out_of_all(tmp_path: Path) -> None:
    # a stream cut off after its usage both has usage and is an error, so the line splits the
    # requests by usage and counts the errors out of all of them (not as a third part of 3)
    log = write_log(
        tmp_path / "log.db",
        [
            row("ok", T0, model="claude-sonnet-4-5", **usage()),
            row("cut", T0 + 60, model="claude-sonnet-4-5", stream=1,
                error="client disconnected before the response was complete", **usage()),
            row("gone", T0 + 120, model="claude-sonnet-4-5", status=502,
                error="upstream unreachable"),
        ],
    )  # fmt: skip
    with closing(sqlite3.connect(log)) as conn:  # counted apart, from the rows themselves
        total, with_usage, errors, both = conn.execute(
            "SELECT COUNT(*), COUNT(total_input_tokens), "
            "SUM(status IS NULL OR status = 0 OR status >= 400 OR error IS NOT NULL), "
            "SUM(total_input_tokens IS NOT NULL AND error IS NOT NULL) FROM requests"
        ).fetchone()
    assert (total, with_usage, errors, both) == (3, 2, 2, 1)
    report = build_report(log, since=T0, until=T0 + 3600, now=T0 + 3600)
    assert dict(summary_rows(report.total, report))["Requests"] == (
        f"{total} ({with_usage} with usage, {total - with_usage} without; "
        f"{errors} errors out of all {total})"
    )


def test_the_requests_line_of_an_empty_window_says_no_all(tmp_path: Path) -> None:
    # 'all' is said of two or more: '0 errors out of all 0' is not a sentence
    report = build_report(
        write_log(tmp_path / "log.db", [row("ok", T0, **usage())]),
        since=T0 + 60, until=T0 + 120, now=T0 + 120,
    )  # fmt: skip
    assert dict(summary_rows(report.total, report))["Requests"] == (
        "0 (0 with usage, 0 without; 0 errors out of 0)"
    )


@pytest.mark.parametrize(
    ("vendor", "api", "first"),
    [
        ("engine", "openai_chat", usage(uncached=100)),
        ("anthropic", "anthropic", usage(w5=100, uncached=0)),
    ],
)
def test_an_engine_break_says_its_tokens_lost_count_whole_tokens_not_blocks(
    tmp_path: Path, vendor: str, api: str, first: dict[str, int]
) -> None:
    # the engine reuses whole 16-token blocks and computes the last prompt token: of the 100
    # tokens its predecessor had, at most 96 could be read back, yet the break counts 100
    family = {"key_fingerprint": "k", "model": "tinystories", "first_segment_hash": "f"}
    log = write_log(
        tmp_path / "log.db",
        [
            row("p", T0, vendor=vendor, api=api, **family, **first),
            row("b", T0 + 10, vendor=vendor, api=api, **family, previous_request_id="p",
                break_reason="system_changed", **usage(uncached=120)),
        ],
    )  # fmt: skip
    report = build_report(log, since=T0, until=T0 + 3600, now=T0 + 3600)
    assert [(b.reason, b.tokens_lost) for b in report.break_reasons] == [("system_changed", 100)]
    text = " ".join(render_table(report, width=200).split())
    note = (
        "* 1 break of the engine upstream: tokens lost counts whole tokens, but the engine reads "
        "its prefix cache in whole KV blocks (16 tokens at its default --block-size) and always "
        "computes the last prompt token, so each such break lost up to one block fewer than "
        "counted"
    )
    assert (note in text) == (vendor == "engine")
    assert report.engine_breaks == (1 if vendor == "engine" else 0)
    page = " ".join(html.unescape(render_html(report)).split())
    assert (note in page) == (vendor == "engine")


def test_ttft_percentiles_are_nearest_rank(tmp_path: Path) -> None:
    rows = [
        row(f"h{i}", T0 + i, ttft_ms=float(v), **usage(read=5))
        for i, v in enumerate(range(10, 110, 10))
    ]
    rows += [
        row(f"m{i}", T0 + 50 + i, ttft_ms=float(v), **usage())
        for i, v in enumerate([300, 100, 200])
    ]
    rows.append(row("err", T0 + 90, ttft_ms=1.0, status=500, **usage(read=5)))  # not counted
    report = build_report(write_log(tmp_path / "log.db", rows), since=T0, until=T0 + 3600)
    hit, miss = report.ttft
    assert (hit.hit, hit.requests, hit.p50_ms, hit.p95_ms) == (True, 10, 50.0, 100.0)
    assert (miss.hit, miss.requests, miss.p50_ms, miss.p95_ms) == (False, 3, 200.0, 300.0)


def test_busy_family_gets_ttl_advice(tmp_path: Path) -> None:
    family = {"key_fingerprint": "k", "model": "claude-sonnet-4-5", "first_segment_hash": "f"}
    # a request every 10 minutes: each 5m write expires before the next request
    rows = [row(f"r{i}", T0 + i * 600, **family, **usage(w5=20000)) for i in range(6)]
    report = build_report(write_log(tmp_path / "log.db", rows), since=T0, until=T0 + 3600)
    (advice,) = report.ttl_advice
    assert (advice.current, advice.recommended, advice.requests) == ("5m", "1h", 6)
    assert advice.prefix_tokens == 20000
    # 5m: 6 writes x 20k x $3.75/MTok; 1h: 1 write x $6 + 5 reads x $0.30
    assert advice.current_cost_usd == pytest.approx(6 * 20000 * 3.75 / 1e6)
    assert advice.recommended_cost_usd == pytest.approx((20000 * 6 + 5 * 20000 * 0.3) / 1e6)
    assert any(r.kind == "ttl" and "from 5m to 1h" in r.message for r in report.recommendations)


# ---------------------------------------------------------------- recommendations


def test_engine_kv_advice_escalates(tmp_path: Path) -> None:
    from promptcache.engine.outputs import EngineStats
    from promptcache.engine.server.metrics import EngineMetrics

    def stats(kv: float, hits: int, preempted: int, swapped: int) -> EngineKvStats:
        snapshot = EngineStats(
            num_running=4, num_waiting=2, num_swapped=swapped, kv_usage=kv, num_free_blocks=1,
            num_total_blocks=100, kv_cache_bytes=1 << 20, prefix_cache_queries_tokens=1000,
            prefix_cache_hits_tokens=hits, num_preemptions=preempted, num_prompt_tokens=1000,
            num_generated_tokens=10,
        )  # fmt: skip
        text = EngineMetrics(lambda: snapshot, lambda: 0).render().decode()
        return EngineKvStats.from_prometheus(text)

    log = write_log(tmp_path / "log.db", [row("a", T0, vendor="engine", **usage(read=90))])

    def engine_advice(kv: EngineKvStats) -> list[str]:
        report = build_report(log, since=T0, until=T0 + 3600, engine=kv)
        return [r.message for r in report.recommendations if r.kind == "engine_kv"]

    assert engine_advice(stats(0.5, 600, 0, 0)) == []
    assert "prefix caching first" in engine_advice(stats(0.97, 20, 3, 0))[0]
    assert "--swap-space" in engine_advice(stats(0.97, 600, 3, 0))[0]
    assert "--kv-cache-dtype" in engine_advice(stats(0.97, 600, 3, 2))[0]
    with pytest.raises(ConfigError, match="kv_cache_usage_ratio"):
        EngineKvStats.from_prometheus("# nothing here\n")


def test_a_break_with_a_fix_is_advised_at_a_high_hit_rate_too(tmp_path: Path) -> None:
    rows = [row(f"r{i}", T0 + i, model="claude-sonnet-4-5", **usage(read=900)) for i in range(5)]
    rows.append(row("b", T0 + 10, model="claude-sonnet-4-5", break_reason="system_changed",
                    break_segment="system[0].text", **usage(w5=900)))  # fmt: skip
    report = build_report(write_log(tmp_path / "log.db", rows), since=T0, until=T0 + 3600)
    assert report.total.token_hit_rate is not None and report.total.token_hit_rate > 0.5
    (advice,) = [r for r in report.recommendations if r.kind == "prefix_stability"]
    assert advice.message.startswith(
        f"Token-weighted hit rate is {percent(report.total.token_hit_rate)}, but cache breaks"
    )
    assert "`system[0].text` (system_changed, 1 break," in advice.message


def test_a_high_hit_rate_without_breaks_gets_no_stability_advice(tmp_path: Path) -> None:
    rows = [row(f"r{i}", T0 + i, model="claude-sonnet-4-5", **usage(read=900)) for i in range(5)]
    report = build_report(write_log(tmp_path / "log.db", rows), since=T0, until=T0 + 3600)
    assert all(r.kind != "prefix_stability" for r in report.recommendations)


def test_no_traffic_says_so() -> None:
    from promptcache.proxy.report import Summary, WastedWrites

    empty = Summary(None, *([0] * 3), None, None, *([0] * 7), 0.0, 0.0, 0.0, 0, 0, 0, 0, 0)
    assert recommend(empty, (), WastedWrites(0, 0, 0.0), ()) == [
        Recommendation("no_data", "No requests with token usage in this window.")
    ]


# ---------------------------------------------------------------- bad input


def test_bad_logs_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no proxy log"):
        build_report(tmp_path / "missing.db", since=0, until=1)
    (tmp_path / "text.db").write_text("not a database at all, just some text " * 50)
    with pytest.raises(ConfigError, match="not a SQLite database") as raised:
        build_report(tmp_path / "text.db", since=0, until=1)
    assert str(raised.value).endswith("pass the proxy's --db file (promptcache.db by default)")
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match="no promptcache `requests` table"):
        build_report(tmp_path / "other.db", since=0, until=1)
    log = write_log(tmp_path / "log.db", [])
    with pytest.raises(ConfigError, match="--until must be later"):
        build_report(log, since=10, until=10)
    with pytest.raises(ConfigError, match="--group-by"):
        build_report(log, since=0, until=10, group_by="color")


def test_an_old_log_is_migrated_before_reporting(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = Database(path)
    db.conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
    MIGRATIONS[0](db)
    db.conn.execute("INSERT INTO schema_version VALUES (1, 0)")
    v1_columns = db.table("requests").columns_dict  # later steps add columns (priced_as)
    db.table("requests").insert(
        {k: v for k, v in row("a", T0, **usage(read=90)).items() if k in v1_columns}
    )
    db.conn.commit()
    db.close()
    report = build_report(path, since=T0, until=T0 + 3600)
    assert report.total.cache_read_tokens == 90
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert set(ROLLUP_TABLES) <= tables


# ---------------------------------------------------------------- tokens and dollars lost


def _break_pair(
    vendor: str, api: str, model: str, prev: dict[str, int], this: dict[str, int]
) -> list[dict[str, Any]]:
    """A predecessor and a request that broke its prefix (``system_changed``)."""
    family = {"vendor": vendor, "api": api, "model": model, "key_fingerprint": "k"}
    return [
        row("p", T0 + 10, **family, **usage(**prev)),
        row("r", T0 + 20, **family, **usage(**this), break_reason="system_changed",
            break_segment="messages[0].content", previous_request_id="p"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("vendor", "api"), [("openai", "openai_chat"), ("engine", "openai_completions")]
)
def test_tokens_lost_without_write_buckets_is_the_predecessors_whole_input(
    tmp_path: Path, vendor: str, api: str
) -> None:
    # automatic caching: the predecessor's whole prompt (5,000 tokens) was in cache; the broken
    # request read nothing and prefilled all of its 6,000 again; 5,000 of them were lost
    rows = _break_pair(
        vendor, api, "gpt-4o", {"read": 4000, "uncached": 1000}, {"read": 0, "uncached": 6000}
    )
    report = build_report(write_log(tmp_path / "log.db", rows), since=T0, until=T0 + 3600)
    (lost,) = report.break_reasons
    assert lost.tokens_lost == 5000
    assert lost.usd_lost == pytest.approx(5000 * (2.50 - 1.25) / 1e6)  # gpt-4o input - read
    # capped by what the request did not read: a partial hit of 3,500 leaves 1,500 lost
    rows = _break_pair(
        vendor, api, "gpt-4o", {"read": 4000, "uncached": 1000}, {"read": 3500, "uncached": 1500}
    )
    report = build_report(write_log(tmp_path / "partial.db", rows), since=T0, until=T0 + 3600)
    assert report.break_reasons[0].tokens_lost == 1500


def test_tokens_lost_with_write_buckets_prices_rewritten_tokens_at_the_write_rate(
    tmp_path: Path,
) -> None:
    # the predecessor had 3,500 tokens in cache (read 2,000 + wrote 1,500); the broken request
    # wrote 3,000 (1h) + 1,000 (5m) and sent 10 uncached: 3,500 lost, of which the first 3,000
    # were written at the 1h rate and 500 at the 5m rate instead of being read
    rows = _break_pair(
        "anthropic", "anthropic", "claude-sonnet-4-5",
        {"read": 2000, "w5": 1500}, {"w1": 3000, "w5": 1000, "uncached": 10},
    )  # fmt: skip
    report = build_report(write_log(tmp_path / "log.db", rows), since=T0, until=T0 + 3600)
    (lost,) = report.break_reasons
    assert lost.tokens_lost == 3500
    # sonnet 4.5: input 3, read 0.30, write 5m 3.75, write 1h 6 (USD per million tokens)
    expected = 3000 * (6 - 0.30) + 500 * (3.75 - 0.30)
    assert lost.usd_lost == pytest.approx(expected / 1e6)


# ---------------------------------------------------------------- JSON money


def test_json_money_is_decimal_text_without_float_noise(tmp_path: Path) -> None:
    import json
    from decimal import Decimal

    from promptcache.proxy.report.render import render_json

    costs = ["0.1", "0.2"]  # the SQLite REAL sum is 0.30000000000000004
    rows = [
        row(f"r{i}", T0 + i, model="claude-sonnet-4-5", cost_usd=c,
            cost_without_cache_usd=str(Decimal(c) * 2), **usage(read=90))
        for i, c in enumerate(costs)
    ]  # fmt: skip
    log = write_log(tmp_path / "log.db", rows)
    report = build_report(log, since=T0, until=T0 + 3600, group_by="model", now=T0 + 99999)
    assert report.total.cost_usd != 0.3  # the float noise this test is about
    data = json.loads(render_json(report))
    expected = sum(map(Decimal, costs))  # independent count: 0.3
    for summary in (data["total"], data["groups"][0]):
        assert summary["cost_usd"] == str(expected) == "0.3"
        assert summary["cost_without_cache_usd"] == str(2 * expected)
        assert summary["net_savings_usd"] == str(expected)
    # the rows are 1 s apart: the timeline's buckets (0.1 s) hold one each
    assert [p["cost_usd"] for p in data["timeline"]] == costs
    assert isinstance(data["wasted_writes"]["premium_usd"], str)

    def money_floats(node: Any, key: str = "") -> list[str]:
        if isinstance(node, dict):
            return [k for key_, v in node.items() for k in money_floats(v, key_)]
        if isinstance(node, list):
            return [k for v in node for k in money_floats(v, key)]
        usd_key = key.endswith("_usd") or key.startswith("usd_")
        return [key] if usd_key and not isinstance(node, str) else []

    assert money_floats(data) == []
