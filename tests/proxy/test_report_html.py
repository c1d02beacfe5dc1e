"""The HTML report of a two-minute window, drawn by real headless Chromium (tests/conftest.py).

The page is built from page_log.py's real SQLite log and measured in the browser at 1,100 and
360 px: what the browser drew is compared with counts made here from the rows. Screenshots go to
the test's temp folder. The page built from a real ``promptcache demo`` log is checked in
tests/demo/test_demo_end_to_end.py.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from browser_support import Chromium, assert_report_drawn
from page_log import HOSTILE, STEP_S, T0, N, is_hit, reason_of, write_page_log

from promptcache.proxy.report import build_report
from promptcache.proxy.report.html import render_html, render_main
from promptcache.proxy.report.page import (
    BreakStrip,
    PageBucket,
    PageTimeline,
    StripSegment,
    TtftHistogram,
    build_page,
)
from promptcache.proxy.report.render import summary_rows
from promptcache.proxy.report.svg import line_chart, strip_svg, ttft_chart

BREAKS = [i for i in range(N) if reason_of(i) not in (None, "new_prefix")]


@pytest.fixture
def page(tmp_path: Path) -> Path:
    db = write_page_log(tmp_path / "log.db")
    report = build_report(db, since=T0, until=T0 + 120, now=T0 + 86400)
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path


def test_two_minute_window_draws_every_chart_with_the_logged_numbers(
    chromium: Chromium, page: Path, tmp_path: Path
) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text), "the report loads a resource"
    assert "<script" not in text, "the static report runs no script"
    assert HOSTILE not in text

    result = chromium.measure_report(page.parent, page.name)
    charts = assert_report_drawn(result)

    # 5-second buckets over the 117 s of traffic: hit rate per bucket, as counted here
    per_bucket: dict[int, list[int]] = {}
    for i in range(N):
        per_bucket.setdefault(int(i * STEP_S // 5), []).append(i)
    expected = [
        sum(is_hit(i) for i in rows) * 0.9 / len(rows) for _, rows in sorted(per_bucket.items())
    ]
    hit = charts["hit-rate"]["marks"]
    assert [round(m["value"], 4) for m in hit] == [round(v, 4) for v in expected]
    xs = [m["x"] for m in hit]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    by_value = sorted(hit, key=lambda m: m["value"])  # higher rate drawn higher (smaller y)
    assert [m["y"] for m in by_value] == sorted((m["y"] for m in hit), reverse=True)

    spend = charts["spend"]["marks"]
    cost = [m for m in spend if m["series"] == "cost"]
    without = [m for m in spend if m["series"] == "cost without cache"]
    assert len(cost) == len(without) == max(per_bucket) + 1
    for c, w in zip(cost, without, strict=True):
        assert c["x"] == w["x"] and (c["y"] < w["y"]) == (c["value"] > w["value"])

    bars = charts["breaks"]["marks"]
    assert sum(m["value"] for m in bars) == len(BREAKS)
    for reason in {reason_of(i) for i in BREAKS}:
        drawn = sum(m["value"] for m in bars if m["series"] == reason)
        assert drawn == sum(1 for i in BREAKS if reason_of(i) == reason)

    ttft = charts["ttft"]["marks"]
    assert sum(m["value"] for m in ttft if m["series"] == "hit") == sum(map(is_hit, range(N)))
    assert sum(m["value"] for m in ttft if m["series"] == "miss") == N - sum(map(is_hit, range(N)))
    # the strip: tools[0] comes first, then system[0]; one mark each, with its break count
    strip = charts["strip"]["marks"]
    assert [m["series"] for m in strip][:3] == ["tools", "tools", "system"]
    assert result["wide"]["divergences"] == [
        sum(1 for i in BREAKS if reason_of(i) == "tools_reordered"),
        sum(1 for i in BREAKS if reason_of(i) == "system_changed"),
    ]
    assert result["wide"]["diffs"] == 2 and result["wide"]["families"] == 2
    assert result["wide"]["breakRows"] == len({reason_of(i) for i in BREAKS})
    assert "Too few" not in result["wide"]["ttftCaption"]

    pages = chromium.print_pdf(page.as_uri(), tmp_path / "report.pdf")
    a4 = (595.28, 841.89)  # points
    assert 1 <= len(pages) <= 8 and all(abs(w - a4[0]) < 2 and abs(h - a4[1]) < 2 for w, h in pages)

    for width, height in ((1100, 2600), (360, 3600)):
        shot = tmp_path / f"report-{width}.png"
        assert chromium.screenshot(page.as_uri(), shot, width, height) == []
        assert shot.stat().st_size > 10_000


def test_families_are_cards_on_a_phone_and_a_table_on_a_desktop(
    chromium: Chromium, page: Path, tmp_path: Path
) -> None:
    result = chromium.measure_report(page.parent, page.name)
    wide, narrow = result["wide"]["familiesLayout"], result["narrow"]["familiesLayout"]
    assert wide["rowDisplay"] == "table-row" and narrow["rowDisplay"] == "block"
    # at 360 px nothing of a family is cut off or scrolled out of view: every cell (cost,
    # saved, reason...) is on its own line inside the card, and the name takes at most 2 lines
    assert narrow["hiddenWidth"] == 0
    labels = [c["label"] for c in narrow["cells"]]
    assert labels == ["family", "requests", "hit rate", "cache read", "cost", "saved",
                      "top break reason"]  # fmt: skip
    assert all(c["right"] <= 360 for c in narrow["cells"])
    assert narrow["titleLines"] <= 2
    for width, height in ((390, 3600), (1440, 2400)):
        shot = tmp_path / f"report-{width}.png"
        assert chromium.screenshot(page.as_uri(), shot, width, height) == []
        assert shot.stat().st_size > 10_000


def test_the_hit_rate_line_leaves_gaps_at_empty_buckets() -> None:
    buckets = tuple(PageBucket(T0 + 5 * i, 1, None, 0.0, 0.0, ()) for i in range(6))
    timeline = PageTimeline(5.0, buckets, ())
    values = [0.5, None, 0.7, 0.8, None, 0.9]
    svg = str(line_chart("hit-rate", "hit rate", timeline, [("hit rate", values, "#000", "")],
                         y_max=1.0, y_fmt="{:.0%}".format))  # fmt: skip
    lines = re.findall(r'<polyline[^>]*points="([^"]*)"', svg)
    assert len(lines) == 1 and len(lines[0].split()) == 2  # only the adjacent 0.7, 0.8
    assert svg.count('<circle class="mark"') == 4  # every value still has its mark


def test_errors_and_ttft_are_worded_for_what_they_count(page: Path) -> None:
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert "the whole response when not" in text  # a non-streamed TTFT is the whole response
    report = build_report(page.parent / "log.db", since=T0, until=T0 + 120, now=T0 + 86400)
    for errors, shown in (
        (1, "1 error out of"),
        (2, "2 errors out of"),
        (1200, "1,200 errors out of"),
    ):
        total = dataclasses.replace(report.total, errors=errors)
        assert f"; {shown} all {total.requests:,})" in dict(summary_rows(total, report))["Requests"]


def test_chart_tooltips_give_a_count_of_one_its_singular() -> None:
    hist = TtftHistogram((0.0, 500.0, 1000.0), hit=(1, 2), miss=(0, 1), caption="")
    tips = re.findall(r"<title>([^<]*)</title>", str(ttft_chart(hist)))
    assert tips == ["hit: 1 request with TTFT 0-500 ms", "hit: 2 requests with TTFT 500 ms-1 s",
                    "miss: 1 request with TTFT 500 ms-1 s"]  # fmt: skip
    # each edge has its unit ("500-1s ms" read as milliseconds); the last bin is open-ended
    hist = TtftHistogram((1000.0, 2000.0, 20000.0, 60000.0), hit=(1, 0, 3), miss=(0, 0, 0),
                         caption="")  # fmt: skip
    tips = re.findall(r"<title>([^<]*)</title>", str(ttft_chart(hist)))
    assert tips == ["hit: 1 request with TTFT 1-2 s", "hit: 3 requests with TTFT 20 s or more"]
    segments = tuple(
        StripSegment(path, kind, 100, 25, None, breaks, 10, breaks)
        for path, kind, breaks in (("tools[0]", "tools", 1), ("system[0]", "system", 3))
    )
    strip = BreakStrip("r1", "system_changed", segments, outside=0, unplaced=())
    tips = re.findall(r"<title>([^<]*)</title>", str(strip_svg(strip)))
    assert tips == [
        "tools[0] (tools): 50.0% of the prompt; 1 break first differs here",
        "1 break first differs in tools[0]",
        "system[0] (system): 50.0% of the prompt; 3 breaks first differ here",
        "3 breaks first differ in system[0]",
    ]


def test_docs_show_the_screenshots_the_script_makes() -> None:
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "report.md").read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]*\]\((img/report-[\w-]+\.png)\)", doc)
    script = (root / "docs" / "report_screenshots.py").read_text(encoding="utf-8")
    made = re.findall(r'\("(report-[\w-]+\.png)"', script)
    assert sorted(shown) == sorted(f"img/{name}" for name in made) and len(made) == 3
    for name in shown:
        data = (root / "docs" / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and 20_000 < len(data) < 300_000, name


@pytest.mark.parametrize(
    ("count", "breaks", "families"),
    [
        (1, "1 more break first differs in", "1 more family."),
        (2, "2 more breaks first differ in", "2 more families."),
        (1200, "1,200 more breaks first differ in", "1,200 more families."),
    ],
)
def test_breaks_and_families_left_off_the_page_are_counted_in_words(
    page: Path, count: int, breaks: str, families: str
) -> None:
    """The notes under the strip's table and the families' table, for breaks in segments the
    drawn request does not have and for the families past the table's ten."""
    report = build_report(page.parent / "log.db", since=T0, until=T0 + 120, now=T0 + 86400)
    built = build_page(report)
    assert built.strip is not None and built.families
    built = dataclasses.replace(
        built, strip=dataclasses.replace(built.strip, outside=count), more_families=count
    )
    text = " ".join(re.sub(r"<[^>]+>", " ", render_main(report, built)).split())
    assert f"{breaks} segments this request does not have." in text, text
    assert families in text, text
