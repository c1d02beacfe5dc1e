"""The HTML report renders its charts in a real browser (headless Chromium, Debian's `chromium`).

The report is served from 127.0.0.1 next to a small harness page that loads it in an iframe and,
once it has loaded, measures every chart's SVG elements with the browser's own layout
(``getBoundingClientRect``, ``getTotalLength``) and writes the numbers into its DOM, which
``chromium --dump-dom`` prints. So the test sees what the browser drew, not the file's text.

Chromium is required: without it the test fails and says how to install it, unless
``PROMPTCACHE_SKIP_BROWSER=1`` is set.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import build_report
from promptcache.proxy.report_html import render_html
from promptcache.proxy.store import open_log

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC
HOSTILE_MODEL = '<img src=x onerror="document.title=1">'
HARNESS = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="report" src="report.html" width="1100" height="3000"></iframe>
<script>
document.getElementById("report").addEventListener("load", function () {
  var doc = this.contentDocument, out = {charts: [], images: doc.images.length, title: doc.title};
  doc.querySelectorAll("svg.chart").forEach(function (svg) {
    var box = svg.getBoundingClientRect(), points = [];
    svg.querySelectorAll("circle.point").forEach(function (c) {
      var r = c.getBoundingClientRect();
      points.push({series: c.dataset.series, value: parseFloat(c.dataset.value),
                   x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width, h: r.height});
    });
    var lines = [];
    svg.querySelectorAll("polyline.line").forEach(function (l) {
      lines.push({series: l.dataset.series, length: l.getTotalLength()});
    });
    out.charts.push({name: svg.dataset.chart, x: box.x, y: box.y, w: box.width,
                     h: box.height, points: points, lines: lines});
  });
  out.breakRows = doc.querySelectorAll("#break-reasons tr[data-reason]").length;
  document.getElementById("result").textContent = JSON.stringify(out);
});
</script></body></html>
"""

# per hour: (requests, hit requests) of 10k-token prompts at claude-sonnet-4-5 prices; a hit reads
# 9k tokens (1k uncached + 9k x 0.30 + 100 out x 15 = $0.0072), a miss writes them at 3.75
# ($0.03825); without cache every request costs 10k x 3 + 100 x 15 = $0.0315.
HOURS = [(4, 0), (4, 2), (4, 3), (4, 4), (2, 1), (4, 4)]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("PROMPTCACHE_SKIP_BROWSER") == "1":
        pytest.skip("PROMPTCACHE_SKIP_BROWSER=1 and no chromium on PATH")
    pytest.fail(
        "headless Chromium is needed to check the HTML report: install it with "
        "`apt-get install -y chromium` (Debian/Ubuntu), or set PROMPTCACHE_SKIP_BROWSER=1 to skip"
    )


def _log(path: Path) -> None:
    db = open_log(path)
    rows = []
    for hour, (count, hits) in enumerate(HOURS):
        for i in range(count):
            hit = i < hits
            row = dict.fromkeys(COLUMN_NAMES)
            row.update(
                id=f"h{hour}r{i}",
                started_at=T0 + hour * 3600 + i * 60,
                vendor="anthropic",
                api="anthropic",
                route="/v1/messages",
                model=HOSTILE_MODEL if hour == 4 else "claude-sonnet-4-5",
                key_fingerprint="k1",
                first_segment_hash="f1",
                status=200,
                stream=0,
                ttft_ms=100.0 if hit else 400.0,
                uncached_input_tokens=1000,
                cache_read_tokens=9000 if hit else 0,
                cache_write_5m_tokens=0 if hit else 9000,
                cache_write_1h_tokens=0,
                cache_write_unknown_tokens=0,
                output_tokens=100,
                total_input_tokens=10000,
                cost_usd=str((1000 * 3 + (9000 * 0.3 if hit else 9000 * 3.75) + 100 * 15) / 1e6),
                cost_without_cache_usd=str((10000 * 3 + 100 * 15) / 1e6),
                break_reason=None if hit else "system_changed",
                break_segment=None if hit else "system[0].text",
            )
            rows.append(row)
    with db.conn:
        db.table("requests").insert_all(rows)
    db.close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The report and the harness page, served from 127.0.0.1."""
    db = tmp_path / "log.db"
    _log(db)
    report = build_report(db, since=T0, until=T0 + len(HOURS) * 3600, now=T0 + 86400)
    (tmp_path / "report.html").write_text(render_html(report), encoding="utf-8")
    (tmp_path / "harness.html").write_text(HARNESS, encoding="utf-8")
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()


def _render_in_browser(url: str, profile: Path) -> dict[str, object]:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    match = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert match, f"chromium printed no harness result (exit {done.returncode}): {done.stderr}"
    assert match.group(1) != "pending", "the report page never finished loading"
    data: dict[str, object] = json.loads(html.unescape(match.group(1)))
    return data


def test_charts_render_with_one_point_per_hour(served: tuple[str, Path]) -> None:
    url, folder = served
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page), "the report loads a resource"

    result = _render_in_browser(f"{url}/harness.html", folder / "profile")
    assert result["images"] == 0 and result["title"] != "1", "a model name injected markup"
    assert result["breakRows"] == 1
    charts = {c["name"]: c for c in result["charts"]}  # type: ignore[attr-defined]
    assert set(charts) == {"hit-rate", "spend"}
    for chart in charts.values():
        assert chart["w"] > 300 and chart["h"] > 100
        for line in chart["lines"]:
            assert line["length"] > 100
        for p in chart["points"]:
            assert p["w"] > 0 and p["h"] > 0
            assert chart["x"] <= p["x"] <= chart["x"] + chart["w"]
            assert chart["y"] <= p["y"] <= chart["y"] + chart["h"]

    hit = charts["hit-rate"]["points"]
    assert [round(p["value"], 4) for p in hit] == [round(h / n * 0.9, 4) for n, h in HOURS]
    xs = [p["x"] for p in hit]
    assert xs == sorted(xs) and len(set(xs)) == len(HOURS)
    # a higher hit rate is drawn higher up (smaller y); equal rates at equal heights
    by_value = sorted(hit, key=lambda p: p["value"])
    assert [p["y"] for p in by_value] == sorted((p["y"] for p in hit), reverse=True)

    spend = charts["spend"]["points"]
    cost = [p for p in spend if p["series"] == "cost"]
    without = [p for p in spend if p["series"] == "cost without cache"]
    hit_usd, miss_usd, plain_usd = 0.0072, 0.03825, 0.0315  # per request, worked out above
    assert [round(p["value"], 6) for p in cost] == [
        round(h * hit_usd + (n - h) * miss_usd, 6) for n, h in HOURS
    ]
    assert [round(p["value"], 6) for p in without] == [round(n * plain_usd, 6) for n, _ in HOURS]
    for c, w in zip(cost, without, strict=True):
        assert c["x"] == w["x"]
        assert (c["y"] < w["y"]) == (c["value"] > w["value"])
