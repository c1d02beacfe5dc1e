"""The live report on the proxy (proxy/report/live.py): ``GET /report`` and ``/report.json`` on
a real proxy on 127.0.0.1 in front of the mock upstream, the official openai client sending the
traffic, and real headless Chromium loading the page (tests/browser_support.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import httpx
import openai
from browser_support import DevTools
from click.testing import CliRunner
from proxy_support import FakeClock, RunningProxy
from upstreams import MockUpstream

from promptcache.cli import cli as promptcache_cli
from promptcache.proxy.report.live import WINDOWS

TOKEN = "live-report-token-0123"
OPENAI_KEY = "sk-proj-live-report-0123456789abcdef"


def chat(proxy: RunningProxy, count: int, token: str | None = None) -> None:
    headers = {"x-promptcache-auth": token} if token else None
    with openai.OpenAI(
        base_url=proxy.url + "/v1", api_key=OPENAI_KEY, max_retries=0, default_headers=headers
    ) as client:
        for i in range(count):
            client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": f"question {i}"}]
            )


def test_report_json_is_the_cli_json_and_follows_new_requests(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    now = time.time()
    clock = FakeClock(now - 1)  # requests start 1 s before the report's `until`
    proxy = start_proxy(auth_token=TOKEN, clock=clock, report_refresh_s=0)
    refused = httpx.get(proxy.url + "/report.json")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Basic ")
    assert "Basic auth" in refused.text
    assert httpx.get(proxy.url + "/report", auth=("anyone", "guess")).status_code == 401
    for garbage in ("Basic !!!not-base64", "Basic", "Bearer " + TOKEN):
        answer = httpx.get(proxy.url + "/report.json", headers={"authorization": garbage})
        assert answer.status_code == 401, garbage
    # Basic auth is for the report's paths only: a vendor route still wants the header
    vendor = httpx.post(proxy.url + "/v1/chat/completions", json={}, auth=("", TOKEN))
    assert vendor.status_code == 401 and "www-authenticate" not in vendor.headers

    header = {"x-promptcache-auth": TOKEN}
    before = httpx.get(proxy.url + "/report.json?window=1h", headers=header)
    assert before.status_code == 200 and before.headers["cache-control"] == "no-store"
    assert before.json()["total"]["requests"] == 0

    chat(proxy, 2, TOKEN)
    rows = proxy.rows(2)
    clock.now = now
    after = httpx.get(proxy.url + "/report.json?window=1h", auth=("", TOKEN))  # Basic auth
    assert after.status_code == 200
    data = after.json()
    assert data["total"]["requests"] == 2
    assert data["total"]["cache_read_tokens"] == sum(r["cache_read_tokens"] for r in rows) > 0

    # the same JSON as `promptcache report --format json` over the same window
    args = ["report", "--db", str(proxy.db_path), "--since", repr(now - 3600)]
    cli = CliRunner().invoke(promptcache_cli, [*args, "--until", repr(now), "--format", "json"])
    assert cli.exit_code == 0, cli.output
    expected = json.loads(cli.output)
    for item in (expected, data):
        item.pop("generated_at")
    assert data == expected

    page = httpx.get(proxy.url + "/report?window=1h", headers=header)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-window="1h"' in page.text and "<script>" in page.text
    for name in WINDOWS:
        assert f'href="report?window={name}"' in page.text
    body = httpx.get(proxy.url + "/report?window=1h&part=main", headers=header)
    assert body.status_code == 200 and "<html" not in body.text
    assert 'id="headline"' in body.text
    bad = httpx.get(proxy.url + "/report.json?window=2h", headers=header)
    assert bad.status_code == 400 and "15m, 1h, 24h, 7d" in bad.json()["error"]["message"]
    assert httpx.get(proxy.url + "/report?part=x", headers=header).status_code == 400

    # the report is the proxy's own: nothing of it reached the upstream
    assert [r.path for r in mock_upstream.requests] == ["/v1/chat/completions"] * 2


def test_without_a_log_the_report_says_so(start_proxy: Callable[..., RunningProxy]) -> None:
    proxy = start_proxy(db_path=None)
    # the option it names is the one that turns the log off (the look-alike --no-record is none)
    options = CliRunner().invoke(promptcache_cli, ["proxy", "--help"]).output
    assert "--no-log" in options and "--no-record" not in options
    for path in ("/report", "/report.json"):
        answer = httpx.get(proxy.url + path)
        message = answer.json()["error"]["message"]
        assert answer.status_code == 404 and "records no log (--no-log)" in message


def test_live_page_redraws_after_new_requests(
    start_proxy: Callable[..., RunningProxy], devtools: DevTools
) -> None:
    proxy = start_proxy()
    chat(proxy, 1)
    proxy.rows(1)
    devtools.navigate(proxy.url + "/report?window=15m")
    devtools.wait_for("document.body.dataset.requests === '1'")
    assert devtools.evaluate("document.getElementById('requests').textContent") == "1"

    chat(proxy, 2)
    proxy.rows(3)
    devtools.wait_for(
        "document.body.dataset.refreshes === '1' && document.body.dataset.requests === '3'"
    )
    assert devtools.evaluate("document.getElementById('requests').textContent") == "3"
    charts = devtools.evaluate(
        "Array.from(document.querySelectorAll('svg.chart')).map(s => s.dataset.chart)"
    )
    assert {"hit-rate", "spend", "ttft"} <= set(charts)
    status = devtools.evaluate("document.getElementById('live-status').textContent")
    assert status.startswith("live: 3 requests; updated")
    assert devtools.console == []


def test_a_15_minute_window_counts_only_the_last_15_minutes(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    # requests 90 and 30 minutes old, then 2 recent ones: the rollups hold them by whole
    # hour, and the last 15 minutes must count the recent ones only, whatever the hour
    now = time.time()
    clock = FakeClock(now - 5400)
    proxy = start_proxy(clock=clock)
    chat(proxy, 1)
    proxy.rows(1)
    clock.now = now - 1800
    chat(proxy, 1)
    proxy.rows(2)
    clock.now = now - 120
    chat(proxy, 2)
    rows = proxy.rows(4)
    clock.now = now
    for window, expected in (("15m", rows[2:]), ("1h", rows[1:]), ("24h", rows)):
        data = httpx.get(proxy.url + f"/report.json?window={window}").json()
        assert (data["since"], data["until"]) == (now - WINDOWS[window], now)
        assert data["total"]["requests"] == len(expected), window
        assert data["total"]["total_input_tokens"] == sum(r["total_input_tokens"] for r in expected)
        assert sum(p["requests"] for p in data["timeline"]) == len(expected)
    page = httpx.get(proxy.url + "/report?window=15m&part=main").text
    assert '<span id="requests">2</span> requests' in page


class TickingClock:
    """A wall clock that moves 1 ms on every call, so every report built gets its own
    ``until``: equal ``until`` values in two answers mean one build served both."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            self.now += 0.001
            return self.now


def test_concurrent_reports_share_one_build_while_forwarding_goes_on(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy(clock=TickingClock(time.time() - 60))
    chat(proxy, 3)
    proxy.rows(3)
    barrier = threading.Barrier(21)
    answers: list[httpx.Response] = []
    forwarded: list[int] = []

    def get_report(path: str) -> None:
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            answers.append(client.get(proxy.url + path))

    def forward() -> None:
        barrier.wait()
        chat(proxy, 5)
        forwarded.append(5)

    paths = ["/report.json?window=7d"] * 12 + ["/report?window=7d"] * 4
    paths += ["/report?window=7d&part=main"] * 4
    threads = [threading.Thread(target=get_report, args=(p,)) for p in paths]
    threads.append(threading.Thread(target=forward))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert forwarded == [5]  # the chat requests were answered while the reports were built
    assert len(answers) == 20 and all(a.status_code == 200 for a in answers)
    cache = proxy.app.state.report_cache
    assert cache.builds == 1
    untils = {a.json()["until"] for a in answers if a.url.path == "/report.json"}
    assert len(untils) == 1  # one build (each build reads the ticking clock once)
    pages = {a.text for a in answers if a.url.path == "/report"}
    assert len(pages) == 2  # the whole page and its body, each rendered once

    # within the refresh interval the cached report is served even though rows were added
    proxy.rows(8)
    again = httpx.get(proxy.url + "/report.json?window=7d").json()
    assert again["until"] in untils and cache.builds == 1


def test_a_window_is_rebuilt_only_after_new_rows(
    start_proxy: Callable[..., RunningProxy], mock_upstream: MockUpstream
) -> None:
    proxy = start_proxy(clock=TickingClock(time.time() - 60), report_refresh_s=0)
    chat(proxy, 1)
    proxy.rows(1)
    first = httpx.get(proxy.url + "/report.json?window=1h").json()
    second = httpx.get(proxy.url + "/report.json?window=1h").json()
    assert first["until"] == second["until"] and first["total"]["requests"] == 1
    cache = proxy.app.state.report_cache
    assert cache.builds == 1
    httpx.get(proxy.url + "/report.json?window=24h")  # another window: its own build
    assert cache.builds == 2
    chat(proxy, 2)
    proxy.rows(3)
    third = httpx.get(proxy.url + "/report.json?window=1h").json()
    assert third["until"] > first["until"] and third["total"]["requests"] == 3
    assert cache.builds == 3
