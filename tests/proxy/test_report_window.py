"""Exact report windows (proxy/report/window.py): every figure covers exactly [since, until).

A deterministic 4-hour log (real SQLite file made by the proxy's own migrations; the rollup
triggers keep the rollups) is reported over windows that start and end mid-hour, one inside a
single hour and one spanning 3+ hours; each figure is checked against a count worked out here in
plain Python over ``SELECT * FROM requests``. The schema step that indexes
``previous_request_id`` (the edges' read-back lookup) is checked on an older log.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import sqlite3
from collections import Counter, defaultdict
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from proxy_support import log_at_version

from promptcache.pricing import lookup_price
from promptcache.proxy.breaks import READS_KEPT_REASONS
from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import Report, build_report
from promptcache.proxy.report.html import render_main
from promptcache.proxy.report.page import build_page
from promptcache.proxy.report.render import render_csv, render_json, render_table
from promptcache.proxy.store import SCHEMA_VERSION, open_log

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC
SPAN_S = 4 * 3600 + 600  # 09:00 to 13:10
NOW = T0 + 10 * 86400  # far later: no write is still within its TTL
MODELS = ("claude-sonnet-4-5", "gpt-4o", "house-model")  # house-model: no price row
REASONS = ("system_changed", "ttl_expired", "lookback_exceeded", "tools_reordered")
SEGMENT = {"system_changed": "system[0].text", "tools_reordered": "tools[0].name",
           "lookback_exceeded": "messages[3]"}  # fmt: skip

#: (name, since, until): mid-hour bounds; inside one hour; 3+ hours; whole-hour edges mixed in.
WINDOWS = [
    ("inside one hour", T0 + 3600 + 750, T0 + 3600 + 2830),
    ("3+ hours, mid-hour ends", T0 + 1234.5, T0 + 3 * 3600 + 2100),
    ("whole hour start, mid-hour end", T0 + 3600, T0 + 2 * 3600 + 17),
    ("mid-hour start, whole hour end", T0 + 3599, T0 + 3 * 3600),
    ("across one hour boundary", T0 + 2 * 3600 - 300, T0 + 2 * 3600 + 300),
    ("the whole log", T0 - 5, T0 + SPAN_S + 5),
]


def _usage(rng: random.Random, read: int, w5: int, w1: int) -> dict[str, int]:
    uncached = rng.randint(5, 300)
    return {
        "uncached_input_tokens": uncached, "cache_read_tokens": read,
        "cache_write_5m_tokens": w5, "cache_write_1h_tokens": w1,
        "cache_write_unknown_tokens": 0, "output_tokens": rng.randint(1, 400),
        "reasoning_tokens": 0, "total_input_tokens": uncached + read + w5 + w1,
    }  # fmt: skip


def _rows(seed: int = 19) -> list[dict[str, Any]]:
    """About 700 requests over :data:`SPAN_S`, in start order (as the writer logs them): 8
    prefix families chained by ``previous_request_id``, breaks of several reasons, errors,
    TTFTs, replicas, ``price_as`` and an engine family without TTLs."""
    rng = random.Random(seed)
    last: dict[int, dict[str, Any]] = {}
    out = []
    t = T0
    i = 0
    while True:
        t += rng.expovariate(1 / 21)
        if t >= T0 + SPAN_S:
            return out
        fam = rng.randrange(8)
        model = MODELS[fam % 3]
        vendor = "engine" if fam == 7 else ("anthropic" if fam % 3 == 0 else "openai")
        row = dict.fromkeys(COLUMN_NAMES)
        row.update(
            id=f"r{i:04d}", started_at=t, stream=i % 2, vendor=vendor,
            api="anthropic" if vendor == "anthropic" else "openai",
            route="/v1/messages" if vendor == "anthropic" else "/v1/chat/completions",
            upstream="fleet" if fam in (1, 4) else vendor, model=model,
            key_fingerprint=f"key{fam % 2}", first_segment_hash=f"family-{fam}",
            approx_prefix_tokens=1500 + 100 * fam,
            replica=("http://a", "http://b")[i % 2] if fam in (1, 4) else None,
            priced_as="claude-haiku-4-5" if model == "house-model" and fam != 5 else None,
        )  # fmt: skip
        i += 1
        if rng.random() < 0.05:
            row.update(status=rng.choice((529, 0)), error="upstream overloaded")
            out.append(row)
            continue
        prev = last.get(fam)
        reason = "new_prefix" if prev is None else (
            rng.choice(REASONS) if rng.random() < 0.2 else None)  # fmt: skip
        prefix = 1000 + 50 * fam
        if reason is None:
            read, write = prefix, rng.choice((0, 0, 200))
        else:
            read, write = (300 if reason in READS_KEPT_REASONS else 0), prefix
        w1 = write if fam in (0, 6) else 0
        row.update(_usage(rng, read, write - w1, w1))
        ttft = rng.lognormvariate(5 if read else 6, 0.5) if rng.random() < 0.9 else None
        cost = None if row["priced_as"] is None and model == "house-model" else rng.random() / 50
        row.update(
            status=200, ttft_ms=ttft, previous_request_id=prev["id"] if prev else None,
            break_reason=reason, break_segment=SEGMENT.get(reason or ""),
            break_offset=rng.randint(0, 900) if reason in SEGMENT else None,
            cost_usd=None if cost is None else f"{cost:.6f}",
            cost_without_cache_usd=None if cost is None else f"{cost * 2:.6f}",
            unexpected_miss=int(reason == "ttl_expired"),
            breakpoints=json.dumps([{"path": "system[0]", "ttl": "5m"}])
            if vendor == "anthropic" else None,
        )  # fmt: skip
        last[fam] = row
        out.append(row)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("window") / "log.db"
    db = open_log(path)
    with db.conn:
        db.table("requests").insert_all(_rows())
    db.close()
    return path


def _select_all(path: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM requests")]


def _in(rows: list[dict[str, Any]], since: float, until: float) -> list[dict[str, Any]]:
    return [r for r in rows if since <= r["started_at"] < until]


def _n(value: Any) -> int:
    return value or 0


def _writes(r: dict[str, Any]) -> int:
    return sum(_n(r[c]) for c in ("cache_write_5m_tokens", "cache_write_1h_tokens",
                                  "cache_write_unknown_tokens"))  # fmt: skip


def _lost(r: dict[str, Any], p: dict[str, Any] | None) -> tuple[int, int, int]:
    """Tokens a break lost, and how many of them the request paid as 5m and 1h writes
    (the definition in proxy/rollup.py's docstring, worked out by hand)."""
    if p is None:
        cap = 0
    elif (
        p["api"] in ("anthropic", "bedrock_converse")
        or (p["breakpoints"] or "[]") != "[]"
        or (_writes(p) > 0)
    ):
        cap = _n(p["cache_read_tokens"]) + _writes(p)
    else:
        cap = _n(p["total_input_tokens"])
    kept = _n(r["cache_read_tokens"]) if r["break_reason"] in READS_KEPT_REASONS else 0
    lost = max(0, min(_n(r["total_input_tokens"]) - _n(r["cache_read_tokens"]), cap - kept))
    lost_1h = min(lost, _n(r["cache_write_1h_tokens"]))
    w5 = _n(r["cache_write_5m_tokens"]) + _n(r["cache_write_unknown_tokens"])
    return lost, min(lost - lost_1h, w5), lost_1h


def _failed(r: dict[str, Any]) -> bool:
    return r["status"] in (None, 0) or r["status"] >= 400 or r["error"] is not None


def _expected_total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    with_input = [r for r in rows if _n(r["total_input_tokens"]) > 0]
    priced = [r for r in rows if r["cost_usd"] is not None]
    return {
        "requests": len(rows),
        "requests_with_usage": sum(r["total_input_tokens"] is not None for r in rows),
        "hit_requests": sum(_n(r["cache_read_tokens"]) > 0 for r in rows),
        **{c: sum(_n(r[c]) for r in rows) for c in (
            "uncached_input_tokens", "cache_read_tokens", "cache_write_5m_tokens",
            "cache_write_1h_tokens", "cache_write_unknown_tokens", "output_tokens",
            "total_input_tokens")},
        "cost_usd": pytest.approx(sum(float(r["cost_usd"]) for r in priced)),
        "cost_without_cache_usd": pytest.approx(
            sum(float(r["cost_without_cache_usd"]) for r in priced)),
        "unpriced_requests": sum(
            r["cost_usd"] is None and r["total_input_tokens"] is not None for r in rows),
        "errors": sum(_failed(r) for r in rows),
        "breaks": sum(r["break_reason"] not in (None, "new_prefix") for r in rows),
        "new_prefixes": sum(r["break_reason"] == "new_prefix" for r in rows),
        "unexpected_misses": sum(r["unexpected_miss"] == 1 for r in rows),
        "request_hit_rate": pytest.approx(
            sum(r["cache_read_tokens"] / r["total_input_tokens"] for r in with_input)
            / len(with_input)) if with_input else None,
    }  # fmt: skip


def _check_breaks(report: Report, rows: list[dict[str, Any]], by_id: dict[str, Any]) -> None:
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"breaks": 0, "tokens": 0, "usd": 0.0})
    segments: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        reason = r["break_reason"]
        if reason in (None, "new_prefix"):
            continue
        lost, lost_5m, lost_1h = _lost(r, by_id.get(r["previous_request_id"]))
        item = per[reason]
        item["breaks"] += 1
        item["tokens"] += lost
        # a model without a price row is priced as the model the proxy priced it as
        stand_in = {row["model"]: row["priced_as"] for row in rows if row["priced_as"]}
        name = r["model"] if r["model"] != "house-model" else stand_in.get(r["model"])
        if name is not None:
            p = lookup_price(name)
            item["usd"] += float(
                lost * (p.input - p.cache_read) + lost_5m * (p.cache_write_5m - p.input)
                + lost_1h * (p.cache_write_1h - p.input)) / 1e6  # fmt: skip
        if r["break_segment"]:
            segments[reason][r["break_segment"]] += 1
    got = {b.reason: b for b in report.break_reasons}
    assert set(got) == set(per)
    for reason, item in per.items():
        b = got[reason]
        assert (b.breaks, b.tokens_lost) == (item["breaks"], item["tokens"]), reason
        assert b.usd_lost == pytest.approx(item["usd"]), reason
        if segments[reason]:
            assert b.top_segment_breaks == max(segments[reason].values())
        latest = sorted((r for r in rows if r["break_reason"] == reason),
                        key=lambda r: r["started_at"], reverse=True)[:3]  # fmt: skip
        assert list(b.example_ids) == [r["id"] for r in latest]


def _check_wasted(report: Report, rows: list[dict[str, Any]], everything: list[Any]) -> None:
    """Writes not read back within their TTL (``now`` is days later: none pending)."""
    successors: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in everything:  # a successor may start after the window: its credit still counts
        if r["previous_request_id"] is not None:
            successors[r["previous_request_id"]].append(r)
    per_model: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for p in rows:
        if p["vendor"] == "engine" or _writes(p) == 0:
            continue
        tokens, requests = _writes(p), 1
        for r in successors[p["id"]]:
            if r["break_reason"] is not None or not _n(r["cache_read_tokens"]) > 0:
                continue
            gap = r["started_at"] - p["started_at"]
            back = (_n(p["cache_write_5m_tokens"]) + _n(p["cache_write_unknown_tokens"])) * (
                gap <= 300) + _n(p["cache_write_1h_tokens"]) * (gap <= 3600)  # fmt: skip
            tokens -= back
            requests -= back > 0
        per_model[p["model"]][0] += tokens
        per_model[p["model"]][1] += requests
    wasted = [v for v in per_model.values() if v[0] > 0]
    assert report.wasted_writes.tokens == sum(v[0] for v in wasted)
    assert report.wasted_writes.requests == sum(v[1] for v in wasted)


def _check_ttft(report: Report, rows: list[dict[str, Any]]) -> None:
    ok = [r for r in rows if r["ttft_ms"] is not None and r["cache_read_tokens"] is not None
          and 200 <= _n(r["status"]) < 400]  # fmt: skip
    got = {t.hit: t for t in report.ttft}
    for hit in (True, False):
        values = sorted(r["ttft_ms"] for r in ok if (r["cache_read_tokens"] > 0) == hit)
        if not values:
            assert hit not in got
            continue
        rank = [max(1, math.ceil(len(values) * p / 100)) for p in (50, 95)]
        t = got[hit]
        assert (t.requests, t.p50_ms, t.p95_ms) == (len(values), *(values[k - 1] for k in rank))


def _check_timeline(report: Report, rows: list[dict[str, Any]], since: float, until: float) -> None:
    size = report.bucket_s
    if until - since < 6 * 3600:
        assert size <= 15 * 60  # minute buckets (or finer) for a window under 6 h
    counts = Counter(math.floor(r["started_at"] / size) for r in rows)
    got = {round(p.start / size): p for p in report.timeline}
    assert {k: p.requests for k, p in got.items()} == dict(counts)
    assert all(p.start == pytest.approx(k * size) for k, p in got.items())
    for k, p in got.items():
        mine = [r for r in rows if math.floor(r["started_at"] / size) == k]
        read = sum(_n(r["cache_read_tokens"]) for r in mine)
        total = sum(_n(r["total_input_tokens"]) for r in mine)
        assert p.hit_rate == (pytest.approx(read / total) if total else None)
        assert p.cost_usd == pytest.approx(sum(float(r["cost_usd"] or 0) for r in mine))


@pytest.mark.parametrize(("name", "since", "until"), WINDOWS, ids=[w[0] for w in WINDOWS])
def test_every_figure_covers_exactly_the_window(
    log: Path, name: str, since: float, until: float
) -> None:
    everything = _select_all(log)
    by_id = {r["id"]: r for r in everything}
    rows = _in(everything, since, until)
    assert rows, name  # every window holds traffic
    report = build_report(log, since=since, until=until, now=NOW)
    assert (report.since, report.until) == (since, until)
    total = report.total
    expected = _expected_total(rows)
    assert {k: getattr(total, k) for k in expected} == expected

    by_model = build_report(log, since=since, until=until, now=NOW, group_by="model")
    assert {g.group: g.requests for g in by_model.groups} == Counter(
        r["model"] for r in rows)  # fmt: skip
    for g in by_model.groups:
        mine = [r for r in rows if r["model"] == g.group]
        assert g.cost_usd == pytest.approx(sum(float(r["cost_usd"] or 0) for r in mine))
        assert g.new_prefixes == sum(r["break_reason"] == "new_prefix" for r in mine)
    by_hour = build_report(log, since=since, until=until, now=NOW, group_by="hour")
    hours = Counter(int(r["started_at"] // 3600) for r in rows)
    assert [g.requests for g in by_hour.groups] == [hours[h] for h in sorted(hours)]

    _check_breaks(report, rows, by_id)
    _check_wasted(report, rows, everything)
    _check_ttft(report, rows)
    _check_timeline(report, rows, since, until)
    priced = Counter((r["model"], r["priced_as"]) for r in rows if r["priced_as"])
    assert {(p.model, p.priced_as): p.requests for p in report.priced_as} == dict(priced)
    replicas = Counter((r["upstream"], r["replica"]) for r in rows if r["replica"])
    got = {(s.upstream, s.replica): s for s in report.replicas}
    assert {k: s.requests for k, s in got.items() if k[1]} == dict(replicas)
    assert got["fleet", None].requests == sum(replicas.values())
    for (upstream, replica), s in got.items():
        mine = [r for r in rows if r["upstream"] == upstream and r["replica"] is not None
                and r["replica"] == (replica or r["replica"])]  # fmt: skip
        assert s.hit_requests == sum(_n(r["cache_read_tokens"]) > 0 for r in mine)
        assert s.errors == sum(_failed(r) for r in mine)
    families = Counter(
        (r["key_fingerprint"], r["model"], r["first_segment_hash"])
        for r in rows if r["first_segment_hash"] and r["total_input_tokens"] is not None
    )  # fmt: skip
    for advice in report.ttl_advice:
        family = (advice.key_fingerprint, advice.model, advice.first_segment_hash)
        assert advice.requests == families[family]

    page = build_page(report)
    all_families = {(r["key_fingerprint"], r["model"], r["first_segment_hash"]) for r in rows
                    if r["first_segment_hash"] and r["total_input_tokens"] is not None}  # fmt: skip
    assert len(page.families) + page.more_families == len(all_families)
    requests = Counter((r["key_fingerprint"], r["model"], r["first_segment_hash"]) for r in rows)
    for f in page.families:
        key = next(k for k in requests if f.label == f"key {k[0][:8]} / {k[1]} / prefix {k[2][:8]}")
        assert f.requests == requests[key]
    buckets = page.timeline.buckets
    assert sum(b.requests for b in buckets) == len(rows)
    assert [(b.start, b.requests) for b in buckets if b.requests] == [
        (p.start, p.requests) for p in report.timeline
    ]
    breaks = Counter(
        r["break_reason"] for r in rows if r["break_reason"] not in (None, "new_prefix")
    )
    drawn: Counter[str] = Counter()
    for b in buckets:
        drawn.update(dict(b.breaks))
    assert drawn == breaks
    assert page.headline.left_tokens == sum(b.tokens_lost for b in report.break_reasons)

    data = json.loads(render_json(report))
    assert (data["since"], data["until"], data["bucket_s"]) == (since, until, report.bucket_s)
    assert [p["requests"] for p in data["timeline"]] == [p.requests for p in report.timeline]
    # the text, CSV and HTML say the exact window too
    stamps = [datetime.fromtimestamp(t, tz=timezone.utc) for t in (since, until)]
    shown = [d.strftime("%Y-%m-%d %H:%M" + (":%S" if d.second or d.microsecond else "")) + " UTC"
             for d in stamps]  # fmt: skip
    assert render_table(report).splitlines()[0].startswith(
        f"promptcache report  {shown[0]} -> {shown[1]}")  # fmt: skip
    assert f"{shown[0]} &rarr; {shown[1]}" in render_main(report, page)
    csv_rows = list(csv.DictReader(io.StringIO(render_csv(by_model))))
    assert {(float(r["since"]), float(r["until"])) for r in csv_rows} == {(since, until)}
    assert int(csv_rows[-1]["requests"]) == len(rows)


def test_a_window_inside_one_hour_reads_no_rollup_row(log: Path) -> None:
    """With the rollups emptied, a window inside one hour still reports every row (all of it
    comes from ``requests``), and a window of whole hours reports none (all from rollups)."""
    copy = log.parent / "no-rollups.db"
    with closing(sqlite3.connect(log)) as src, closing(sqlite3.connect(copy)) as dst:
        src.backup(dst)
        for table in ("report_hourly", "report_breaks_hourly", "report_family_hourly",
                      "report_replica_hourly"):  # fmt: skip
            dst.execute(f"DELETE FROM {table}")
        dst.commit()
    since, until = WINDOWS[0][1:]
    rows = _in(_select_all(log), since, until)
    assert build_report(copy, since=since, until=until, now=NOW).total.requests == len(rows)
    whole = build_report(copy, since=T0 + 3600, until=T0 + 3 * 3600, now=NOW)
    assert whole.total.requests == 0


def test_a_version_6_log_gains_the_predecessor_index_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    db = log_at_version(path, 6)
    rows = _rows()[:200]
    v6_columns = db.table("requests").columns_dict  # later steps add columns
    with db.conn:
        db.table("requests").insert_all([{k: r[k] for k in r if k in v6_columns} for r in rows])
    db.close()
    with closing(sqlite3.connect(path)) as conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(requests)")}
    assert "idx_requests_previous" not in indexes

    since, until = rows[10]["started_at"] - 0.5, rows[150]["started_at"]
    report = build_report(path, since=since, until=until, now=NOW)  # migrates in place
    with closing(sqlite3.connect(path)) as conn:
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(requests)")}
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version")]
        kept = conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    assert "idx_requests_previous" in indexes and kept == 200
    assert versions == list(range(1, SCHEMA_VERSION + 1)) and SCHEMA_VERSION >= 7
    assert report.total.requests == 140 == len(_in(rows, since, until))
    mine = _in(rows, since, until)
    assert report.total.cache_read_tokens == sum(_n(r["cache_read_tokens"]) for r in mine)
