"""The text report, the HTML report and the proxy's live ``/report`` give the same advice.

One log through a real proxy on 127.0.0.1 (the official ``anthropic`` client, the mock
upstream): a conversation that reads its prefix back (token-weighted hit rate above
``LOW_HIT_RATE``), then one request whose system prompt carries a new timestamp, which the
explainer calls ``system_changed``. All three views come from ``report.advice.recommend``: the
terminal lists it, the HTML page leads with its first item and lists them all.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
from click.testing import CliRunner
from proxy_support import FakeClock, RunningProxy

from promptcache.cli import cli
from promptcache.proxy.report import build_report
from promptcache.proxy.report.advice import LOW_HIT_RATE, NO_RECOMMENDATIONS

KEY = "sk-ant-api03-agree-test-0123456789abcdef"
BASE = "You are the support agent of Acme Anvils. Answer briefly and cite the manual. " * 30


def _system(clock_text: str) -> list[dict[str, Any]]:
    text = f"{BASE}Current time: {clock_text}"
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def _turns(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " * 20}
        for i in range(n)
    ]


def _words(markup: str) -> str:
    """The text of an HTML fragment, tags dropped and whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


def test_text_html_and_live_report_give_the_same_advice(
    start_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    # recent traffic: the CLI's report is of the wall clock's now, so every view sees the
    # same writes past their TTL
    t0 = time.time() - 1000
    clock = FakeClock(t0)
    proxy = start_proxy(clock=clock, report_refresh_s=0)
    steps = [(0, "09:00:00", 1), (10, "09:00:00", 3), (20, "09:00:00", 5), (30, "09:00:30", 5)]
    with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
        for at, clock_text, n in steps:
            clock.now = t0 + at
            client.messages.create(
                model="claude-sonnet-4-5", max_tokens=64, system=_system(clock_text),
                messages=_turns(n),  # type: ignore[arg-type]
            )  # fmt: skip
    rows = proxy.rows(len(steps))
    assert [r["break_reason"] for r in rows] == ["new_prefix", None, None, "system_changed"]
    now = clock.now = time.time()
    since, until = now - 3600, now

    report = build_report(proxy.db_path, since=since, until=until, now=now)
    assert report.total.token_hit_rate is not None
    assert report.total.token_hit_rate >= LOW_HIT_RATE  # high, yet a break worth fixing
    first = report.recommendations[0]
    assert first.kind == "prefix_stability"
    assert "`system[0].text` (system_changed, 1 break," in first.message
    assert "move per-request values" in first.message

    window = ["--db", str(proxy.db_path), "--since", repr(since), "--until", repr(until)]
    text = CliRunner().invoke(cli, ["report", *window])
    assert text.exit_code == 0, text.output
    listed = " ".join(text.output.split("Recommendations", 1)[1].split())
    assert f"1. {first.message}" in listed
    assert NO_RECOMMENDATIONS not in text.output

    out = tmp_path / "report.html"
    written = CliRunner().invoke(cli, ["report", *window, "--format", "html", "-o", str(out)])
    assert written.exit_code == 0, written.output
    live = httpx.get(proxy.url + "/report?window=1h", timeout=30)
    assert live.status_code == 200
    for page in (out.read_text(encoding="utf-8"), live.text):
        card = page.split('id="top-change"', 1)[1].split("</div>\n</div>", 1)[0]
        assert _words(first.message.replace("`", "")) in _words(card)
        assert "<code>system[0].text</code>" in card  # Markdown code spans become <code>
        listed_html = page.split('id="recommendations"', 1)[1].split("</ol>", 1)[0]
        items = re.findall(r"<li data-kind=\"([a-z_]+)\">(.*?)</li>", listed_html, re.S)
        assert [kind for kind, _ in items] == [r.kind for r in report.recommendations]
        assert _words(items[0][1]) == _words(first.message.replace("`", ""))
        assert "`" not in listed_html and NO_RECOMMENDATIONS not in page
        # one token count per request: the strip states the upstream's count of its request
        strip = page.split('id="breaks"', 1)[1].split("<figure", 1)[0]
        broke = rows[3]
        assert f"<code>{broke['id']}</code>" in strip
        counts = re.findall(r"([\d,]+) input tokens", _words(strip))
        assert counts == [f"{broke['total_input_tokens']:,}"]
        # as a number of its own: the request id is hex, and may hold the same digits
        numbers = re.findall(r"(?<![\w,])[\d,]*\d(?![\w,])", _words(strip))
        assert f"{broke['approx_prefix_tokens']:,}" not in numbers
        # the lost tokens the headline states are the upstream's too, and the sentence ends
        left = _words(page.split('id="left"', 1)[1].split("</div></div>", 1)[0])
        assert f"{report.break_reasons[0].tokens_lost:,} input tokens lost to 1 cache break" in left
        assert not left.rstrip(".").endswith("priced")
