"""Real headless Chromium (Debian's package) for tests: tests/conftest.py's ``chromium`` and
``devtools`` fixtures hand these out.

:class:`Chromium`: :meth:`Chromium.measure_report` opens an HTML report in
two iframes (1,100 px and 360 px wide) of a harness page served from 127.0.0.1, measures what
the browser drew (every chart's marks, the break strip, the diffs, the page's scroll width) and
writes the numbers into the harness DOM, which ``--dump-dom`` prints; :meth:`Chromium.dump_dom`
and :meth:`Chromium.screenshot` run any URL. Console messages (``console.*``, uncaught errors,
failed loads) are read from Chromium's log on stderr.

:class:`DevTools` drives one page over the DevTools protocol (the live page's test).
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from promptcache.proxy.report import MAX_BUCKETS, svg

#: Flags of every run: no network beyond the page, no first-run or sync machinery.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)
_CONSOLE = re.compile(r":CONSOLE(?:\(\d+\))?\] (.*)$", re.M)

HARNESS = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="wide" src="REPORT" width="1100" height="2400"></iframe>
<iframe id="narrow" src="REPORT" width="360" height="2400"></iframe>
<script>
function measure(doc) {
  var root = doc.documentElement, out = {charts: [], images: doc.images.length,
    title: doc.title, scrollWidth: root.scrollWidth, clientWidth: root.clientWidth};
  doc.querySelectorAll("svg.chart").forEach(function (svg) {
    var box = svg.getBoundingClientRect(), marks = [], lines = [];
    svg.querySelectorAll(".mark").forEach(function (m) {
      var r = m.getBoundingClientRect();
      marks.push({series: m.dataset.series, value: parseFloat(m.dataset.value),
                  x: r.x + r.width / 2, y: r.y + r.height / 2, w: r.width, h: r.height});
    });
    svg.querySelectorAll("polyline.line").forEach(function (l) {
      lines.push({series: l.dataset.series, length: l.getTotalLength()});
    });
    out.charts.push({name: svg.dataset.chart, x: box.x, y: box.y, w: box.width,
                     h: box.height, marks: marks, lines: lines});
  });
  function count(selector) { return doc.querySelectorAll(selector).length; }
  out.divergences = [];
  doc.querySelectorAll('svg[data-chart="strip"] .divergence').forEach(function (d) {
    out.divergences.push(parseInt(d.dataset.value, 10));
  });
  out.diffs = count("pre.diff"); out.removed = count("pre.diff del");
  out.added = count("pre.diff ins"); out.breakRows = count("#break-reasons tr[data-reason]");
  out.families = count("#families tr") - 1;
  var families = doc.getElementById("families");
  if (families) {
    var wrap = families.parentElement, row = families.querySelector("tr:not(.head)");
    var title = row.querySelector("td"), style = doc.defaultView.getComputedStyle(title);
    out.familiesLayout = {rowDisplay: doc.defaultView.getComputedStyle(row).display,
      hiddenWidth: wrap.scrollWidth - wrap.clientWidth,
      titleLines: Math.round(title.getBoundingClientRect().height /
                             parseFloat(style.lineHeight || "20")),
      cells: Array.prototype.map.call(row.querySelectorAll("td"), function (td) {
        var r = td.getBoundingClientRect();
        return {label: td.dataset.label, right: r.right, width: r.width};
      })};
  }
  out.headline = {};
  ["saved", "left", "top-change"].forEach(function (id) {
    var el = doc.getElementById(id); out.headline[id] = el ? el.textContent : null;
  });
  out.ttftCaption = (doc.getElementById("ttft-caption") || {}).textContent || null;
  return out;
}
var frames = ["wide", "narrow"], loaded = 0, result = {};
frames.forEach(function (id) {
  document.getElementById(id).addEventListener("load", function () {
    result[id] = measure(this.contentDocument);
    loaded += 1;
    if (loaded === frames.length) {
      document.getElementById("result").textContent = JSON.stringify(result);
    }
  });
});
</script></body></html>
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class Chromium:
    """Headless Chromium runs, each with a fresh profile under ``tmp``."""

    def __init__(self, binary: str, tmp: Path) -> None:
        self.binary = binary
        self._tmp = tmp
        self._runs = 0

    def run(self, url: str, *extra: str, timeout: float = 120) -> tuple[str, list[str]]:
        """Run Chromium on ``url`` with ``extra`` flags: (stdout, console messages)."""
        self._runs += 1
        profile = self._tmp / f"profile-{self._runs}"
        command = [self.binary, *FLAGS, f"--user-data-dir={profile}", *extra, url]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        return done.stdout, _CONSOLE.findall(done.stderr)

    def dump_dom(self, url: str, budget_ms: int = 10000) -> tuple[str, list[str]]:
        """The DOM after ``budget_ms`` of virtual time, and the console messages."""
        return self.run(url, f"--virtual-time-budget={budget_ms}", "--dump-dom")

    def screenshot(self, url: str, path: Path, width: int, height: int) -> list[str]:
        """A PNG of the top ``width`` x ``height`` pixels of ``url``; the console messages."""
        _, console = self.run(
            url,
            f"--screenshot={path}",
            f"--window-size={width},{height}",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        )
        assert path.is_file(), f"chromium wrote no screenshot to {path}"
        return console

    def print_pdf(self, url: str, path: Path) -> list[tuple[float, float]]:
        """Print ``url`` to a PDF at ``path`` (the page's own ``@page`` size); the size of
        each page in points, read from the PDF's ``/MediaBox`` entries."""
        self.run(url, f"--print-to-pdf={path}", "--no-pdf-header-footer")
        assert path.is_file(), f"chromium wrote no PDF to {path}"
        boxes = re.findall(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", path.read_bytes())
        return [(float(w), float(h)) for w, h in boxes]

    def measure_report(self, folder: Path, name: str) -> dict[str, Any]:
        """Measure ``folder/name`` at 1,100 px (``"wide"``) and 360 px (``"narrow"``), served
        with its folder from 127.0.0.1; ``"console"`` holds the console messages."""
        harness = folder / f"harness-{name}"
        harness.write_text(HARNESS.replace("REPORT", name), encoding="utf-8")
        with serve_folder(folder) as base:
            dom, console = self.dump_dom(f"{base}/{harness.name}")
        match = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
        assert match, f"chromium printed no harness result: {dom[:500]}"
        assert match.group(1) != "pending", "the report page never finished loading"
        result: dict[str, Any] = json.loads(html.unescape(match.group(1)))
        result["console"] = console
        return result


@contextlib.contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """A static HTTP server for ``folder`` on 127.0.0.1 (yields its base URL), stopped after."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class DevTools:
    """A Chromium driven over the DevTools protocol on ``--remote-debugging-pipe`` (JSON
    messages ending in NUL on fds 3 and 4; https://chromedevtools.github.io/devtools-protocol/,
    checked 2026-12-01): one page, :meth:`evaluate` in it, console messages collected."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        command = [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"]
        # The child gets the pipe ends as fds 3 (commands in) and 4 (replies out); every other
        # descriptor of ours is close-on-exec, so close_fds=False leaks nothing else.
        self._proc = subprocess.Popen(
            [*command, "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=functools.partial(_as_fds_3_and_4, to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.console: list[str] = []
        self._next = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self._call(f"{domain}.enable", session=True)

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                self._note(message)

    def _note(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            args = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            self.console.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.console.append(f"exception: {text}")
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.console.append(f"log.{entry['level']}: {entry['text']} {entry.get('url', '')}")
        with self._cond:
            if "id" in message:
                self._replies[message["id"]] = message
            self._cond.notify_all()

    def _call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        with self._cond:
            ok = self._cond.wait_for(lambda: self._next in self._replies, timeout=60)
            assert ok, f"chromium did not answer {method}"
            reply = self._replies.pop(self._next)
        assert "error" not in reply, f"{method}: {reply['error']}"
        result: dict[str, Any] = reply["result"]
        return result

    def navigate(self, url: str) -> None:
        self._call("Page.navigate", {"url": url}, session=True)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` in the page."""
        reply = self._call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30) -> Any:
        """Evaluate ``expression`` until it is truthy (every 0.1 s); its value."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                assert value, f"{expression} stayed falsy for {timeout_s} s"
                return value
            time.sleep(0.1)

    def close(self) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self._call("Browser.close")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def _as_fds_3_and_4(read_fd: int, write_fd: int) -> None:
    """In the child before exec: put the pipe ends where ``--remote-debugging-pipe`` reads."""
    read_copy, write_copy = os.dup(read_fd), os.dup(write_fd)
    os.dup2(read_copy, 3)
    os.dup2(write_copy, 4)


#: The shortest line a chart draws, in SVG user units: a flat run over two adjacent buckets of
#: the most a timeline has (proxy/report/svg.py's plot width over MAX_BUCKETS), less rounding.
MIN_LINE_LENGTH = (svg._W - svg._LEFT - svg._RIGHT) / MAX_BUCKETS - 0.5


#: The charts of a report page whose window has breaks (without breaks: no strip marks and no
#: breaks chart).
REPORT_CHARTS = frozenset({"strip", "hit-rate", "spend", "breaks", "ttft"})


def assert_report_drawn(
    result: dict[str, Any], *, with_breaks: bool = True
) -> dict[str, dict[str, Any]]:
    """What every report page must show in :meth:`Chromium.measure_report`'s ``result`` at both
    widths: each chart with more than one mark, every mark inside its chart, the break strip's
    first-divergence marks and a before/after diff (``with_breaks``), no injected markup, no
    sideways scrolling at 360 px, a quiet console. Returns the wide page's charts by name."""
    assert result["console"] == [], result["console"]
    expected = REPORT_CHARTS if with_breaks else REPORT_CHARTS - {"breaks"}
    for width in ("wide", "narrow"):
        frame = result[width]
        charts = {c["name"]: c for c in frame["charts"]}
        assert expected <= set(charts), f"{width}: charts {sorted(charts)}"
        for name, chart in charts.items():
            assert len(chart["marks"]) > 1, f"{width}: chart {name} drew {chart['marks']}"
            for m in chart["marks"]:
                assert m["w"] > 0 and m["h"] > 0, (name, m)
                assert chart["x"] - 1 <= m["x"] <= chart["x"] + chart["w"] + 1, (name, m)
                assert chart["y"] - 1 <= m["y"] <= chart["y"] + chart["h"] + 1, (name, m)
            for line in chart["lines"]:  # a run joins two adjacent buckets at least
                assert line["length"] >= MIN_LINE_LENGTH, (name, line)
        if with_breaks:
            assert frame["divergences"], f"{width}: no first-divergence mark on the strip"
            assert frame["diffs"] >= 1 and frame["removed"] >= 1 and frame["added"] >= 1
        assert frame["images"] == 0 and frame["title"] != "1", "log text injected markup"
    narrow = result["narrow"]
    assert narrow["clientWidth"] <= 360
    assert narrow["scrollWidth"] <= narrow["clientWidth"], "the page scrolls sideways at 360 px"
    wide = {c["name"]: c for c in result["wide"]["charts"]}
    for name in expected - {"strip"}:
        assert wide[name]["w"] > 300, name
    return wide
