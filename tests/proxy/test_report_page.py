"""The HTML page's figures (proxy/report/page.py) against counts made here from the rows that
page_log.py wrote to a real SQLite log."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from pathlib import Path

import pytest
from page_log import (
    STEP_S,
    T0,
    N,
    cost,
    is_hit,
    reason_of,
    ttft_ms,
    without_segment_tokens,
    write_page_log,
)

from promptcache.proxy.report import build_report
from promptcache.proxy.report.page import (
    MAX_BUCKETS,
    Page,
    build_page,
    diff_runs,
    pick_bucket_s,
)
from promptcache.proxy.report.page_sql import TTFT_EDGES_MS

BREAKS = [i for i in range(N) if reason_of(i) not in (None, "new_prefix")]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Page:
    db = write_page_log(tmp_path_factory.mktemp("page") / "log.db")
    report = build_report(db, since=T0, until=T0 + 120, now=T0 + 86400)
    return build_page(report)


def test_bucket_size_comes_from_the_span_minutes_under_six_hours() -> None:
    assert pick_bucket_s(117) == 5
    assert pick_bucket_s(3.5) == 0.2
    for span in (600, 3600, 6 * 3600 - 1):
        size = pick_bucket_s(span)
        assert size < 3600 and span / size < MAX_BUCKETS
    assert pick_bucket_s(7 * 86400) == 6 * 3600
    assert pick_bucket_s(10 * 365 * 86400) == 7 * 86400


def test_timeline_buckets_match_the_rows(page: Page) -> None:
    timeline = page.timeline
    size = timeline.bucket_s
    assert size == 5  # the span is 117 s
    per_bucket: dict[int, list[int]] = {}
    for i in range(N):
        per_bucket.setdefault(int(i * STEP_S // size), []).append(i)
    assert len(timeline.buckets) == max(per_bucket) + 1
    for k, bucket in enumerate(timeline.buckets):
        rows = per_bucket.get(k, [])
        assert bucket.start == T0 + k * size
        assert bucket.requests == len(rows)
        reads = sum(900 for i in rows if is_hit(i))
        assert bucket.hit_rate == (pytest.approx(reads / (1000 * len(rows))) if rows else None)
        assert bucket.cost_usd == pytest.approx(sum(cost(i)[0] for i in rows))
        assert bucket.cost_without_cache_usd == pytest.approx(sum(cost(i)[1] for i in rows))
        expected = Counter(reason_of(i) for i in rows if i in BREAKS)
        assert dict(bucket.breaks) == dict(expected)
    totals = Counter(reason_of(i) for i in BREAKS)
    assert list(timeline.reasons) == sorted(totals, key=lambda r: (-totals[r], r))


def test_headline_sums_savings_and_break_losses(page: Page) -> None:
    h = page.headline
    saved = sum(cost(i)[1] - cost(i)[0] for i in range(N))
    assert h.saved_usd == pytest.approx(saved)
    assert h.saved_fraction == pytest.approx(saved / sum(cost(i)[1] for i in range(N)))
    assert h.left_usd == pytest.approx(sum(b.usd_lost for b in page.report.break_reasons))
    assert h.left_usd > 0
    # what to change first is the report's own first recommendation (the list the CLI prints)
    assert h.change is not None and h.change == page.report.recommendations[0]
    assert h.change.kind == "prefix_stability"
    assert "`system[0].text` (system_changed" in h.change.message
    breaks = sum(1 for i in BREAKS if reason_of(i) == "system_changed")
    assert f"{breaks} breaks" in h.change.message
    assert "system prompt" in h.change.message


def test_strip_is_the_latest_top_breaker_with_the_breaks_placed(page: Page) -> None:
    strip = page.strip
    assert strip is not None
    latest = max(i for i in BREAKS if reason_of(i) == "system_changed")
    assert strip.request_id == f"r{latest:02d}" and strip.reason == "system_changed"
    paths = [s.path for s in strip.segments]
    assert paths[:3] == ["tools[0]", "tools[1]", "system[0]"]
    assert len(paths) == 3 + 2 + latest % 4
    # widths by the tokens logged per segment (a quarter of the characters in this log)
    assert strip.unit == "tokens"
    assert [s.tokens for s in strip.segments] == [s.chars // 4 for s in strip.segments]
    assert [s.tokens for s in strip.segments][:3] == [100, 100, 300]
    assert strip.total == 500 + 50 * (2 + latest % 4) == strip.approx_tokens
    by_path = {s.path: s for s in strip.segments}
    assert by_path["system[0]"].breakpoint_ttl == "5m"
    assert [s.path for s in strip.segments if s.breakpoint_ttl is not None] == ["system[0]"]
    system = sum(1 for i in BREAKS if reason_of(i) == "system_changed")
    tools = sum(1 for i in BREAKS if reason_of(i) == "tools_reordered")
    assert (by_path["system[0]"].breaks, by_path["system[0]"].offset) == (system, 40)
    assert by_path["system[0]"].offset_breaks == system
    assert (by_path["tools[0]"].breaks, by_path["tools[0]"].offset) == (tools, 9)
    assert sum(s.breaks for s in strip.segments) == system + tools
    assert strip.outside == 0
    assert strip.unplaced == (("ttl_expired", 1),)


def test_a_log_without_segment_token_counts_draws_and_says_characters(tmp_path: Path) -> None:
    from promptcache.proxy.report.html import render_main

    db = without_segment_tokens(write_page_log(tmp_path / "old.db"))
    report = build_report(db, since=T0, until=T0 + 120, now=T0 + 86400)
    strip = build_page(report).strip
    assert strip is not None and strip.unit == "characters"
    assert all(s.tokens is None for s in strip.segments)
    chars = [s.chars for s in strip.segments]
    assert [strip.size(s) for s in strip.segments] == chars and strip.total == sum(chars)
    html = " ".join(render_main(report).split())
    assert "each as wide as its share of the prompt (its characters: this request" in html
    assert "width by share of characters" in html and "share of tokens" not in html
    assert "cl100k_base</code> tokens, counted" not in html


def test_top_divergences_are_character_diffs_of_the_latest_excerpts(page: Page) -> None:
    system = [i for i in BREAKS if reason_of(i) == "system_changed"]
    tools = [i for i in BREAKS if reason_of(i) == "tools_reordered"]
    assert [(d.reason, d.breaks) for d in page.diffs] == [
        ("system_changed", len(system)),
        ("tools_reordered", len(tools)),
    ]
    first = page.diffs[0]
    # the changed value (the time, 09:00:0X) starts seven characters before the first changed
    # digit, and is named
    assert first.offset == 40 - len("09:00:0") and first.segment == "system[0].text"
    assert first.kind == "a time" and page.diffs[1].kind is None
    assert first.request_id == f"r{system[-1]:02d}"
    removed = "".join(r.text for r in first.before if r.kind == "removed")
    added = "".join(r.text for r in first.after if r.kind == "added")
    assert (removed, added) == (str(system[-1] - 1)[-1], str(system[-1])[-1])
    tool = page.diffs[1]
    assert "".join(r.text for r in tool.before) == '{"name":"alpha","description"'
    assert "".join(r.text for r in tool.after) == '{"name":"beta","description"'


def test_diff_runs_rebuild_both_sides() -> None:
    before, after = diff_runs("time 09:00:04 id ab12", "time 09:00:05 id cd12")
    assert "".join(r.text for r in before) == "time 09:00:04 id ab12"
    assert "".join(r.text for r in after) == "time 09:00:05 id cd12"
    assert [r.text for r in before if r.kind == "removed"] == ["4", "ab"]
    assert [r.text for r in after if r.kind == "added"] == ["5", "cd"]
    assert all(r.kind != "added" for r in before) and all(r.kind != "removed" for r in after)
    # two random ids share a character by chance: still one change, not three
    before, after = diff_runs("id: 92dabf33064a.", "id: e1fe0d93ea27.")
    assert [r.kind for r in before] == ["same", "removed", "same"]
    assert [r.text for r in after] == ["id: ", "e1fe0d93ea27", "."]


def test_families_costliest_first_with_their_top_reason(page: Page) -> None:
    expected = []
    for name, rows in (("fam-a", range(0, N, 2)), ("fam-b", range(1, N, 2))):
        reasons = Counter(reason_of(i) for i in rows if i in BREAKS)
        top = min(reasons, key=lambda r: (-reasons[r], r)) if reasons else None
        expected.append(
            (
                f"key k1 / claude-sonnet-4-5 / prefix {name}",
                len(rows),
                sum(900 for i in rows if is_hit(i)),
                round(sum(cost(i)[0] for i in rows), 9),
                top,
            )
        )
    expected.sort(key=lambda e: -e[3])
    got = [(f.label, f.requests, f.cache_read_tokens, round(f.cost_usd, 9), f.top_reason)
           for f in page.families]  # fmt: skip
    assert got == expected and page.more_families == 0


def test_ttft_histograms_count_every_successful_request(page: Page) -> None:
    hist = page.ttft
    lo = TTFT_EDGES_MS.index(hist.edges_ms[0])

    def counts(hit: bool) -> list[int]:
        bins = [0] * (len(TTFT_EDGES_MS) - 1)
        for i in range(N):
            if is_hit(i) == hit:
                bins[min(bisect.bisect_right(TTFT_EDGES_MS, ttft_ms(i)) - 1, len(bins) - 1)] += 1
        return bins[lo : lo + len(hist.hit)]

    assert list(hist.hit) == counts(True) and list(hist.miss) == counts(False)
    assert sum(hist.hit) + sum(hist.miss) == N
    hits = sorted(ttft_ms(i) for i in range(N) if is_hit(i))
    misses = sorted(ttft_ms(i) for i in range(N) if not is_hit(i))

    def median(values: list[float]) -> float:  # nearest rank
        return values[math.ceil(len(values) / 2) - 1]

    gap = median(misses) - median(hits)
    assert gap > 0
    assert f"Cache hits: {len(hits)} requests" in hist.caption
    assert f"Cache misses: {len(misses)} requests" in hist.caption
    assert f"The median of the hits is {gap:,.0f} ms lower in this window." in hist.caption


def test_empty_window_draws_nothing_and_says_so(tmp_path: Path) -> None:
    db = write_page_log(tmp_path / "log.db")
    report = build_report(db, since=T0 + 7200, until=T0 + 7300, now=T0 + 86400)
    page = build_page(report)
    assert page.strip is None and page.diffs == () and page.families == ()
    assert page.timeline.buckets == () and page.ttft.hit == ()
    assert page.headline.saved_fraction is None and page.headline.change is not None
    assert page.headline.change.kind == "no_data"
    assert "Nothing to compare." in page.ttft.caption


def test_hour_buckets_from_the_rollup_equal_the_rows(tmp_path: Path) -> None:
    # the same 40 rows spread over 3 days (one every 1.8 h): 3-hour buckets, summed by the
    # hourly rollup, against sums made here
    from page_log import row

    from promptcache.proxy.store import open_log

    rows = [row(i) | {"started_at": T0 + i * 6480.0} for i in range(N)]
    db = open_log(tmp_path / "log.db")
    with db.conn:
        db.table("requests").insert_all(rows)
    db.close()
    span = (N - 1) * 6480.0
    report = build_report(tmp_path / "log.db", since=T0, until=T0 + span + 1, now=T0 + 10**6)
    timeline = build_page(report).timeline
    size = pick_bucket_s(span)
    assert timeline.bucket_s == size == 3 * 3600
    origin = math.floor(T0 / size) * size
    per_bucket: dict[int, list[int]] = {}
    for i in range(N):
        per_bucket.setdefault(int((T0 + i * 6480.0 - origin) // size), []).append(i)
    assert len(timeline.buckets) == max(per_bucket) + 1
    for k, bucket in enumerate(timeline.buckets):
        members = per_bucket.get(k, [])
        assert bucket.start == origin + k * size and bucket.requests == len(members)
        assert bucket.cost_usd == pytest.approx(sum(cost(i)[0] for i in members))
        assert dict(bucket.breaks) == dict(Counter(reason_of(i) for i in members if i in BREAKS))
