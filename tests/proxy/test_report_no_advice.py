"""The HTML report of a window that needs no change says so in one plain sentence.

A proxy under uvicorn on 127.0.0.1 in front of the mock upstream (tests/proxy/upstreams.py),
one request through the official ``openai`` client, a real SQLite log, then
``promptcache report --format html`` on it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

import openai
from click.testing import CliRunner
from proxy_support import RunningProxy

from promptcache.cli import cli


def test_the_top_change_card_of_a_window_without_advice_reads_as_one_sentence(
    start_proxy: Callable[..., RunningProxy], tmp_path: Path
) -> None:
    proxy = start_proxy()
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test-no-advice-0123")
    client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is order 17?"}]
    )
    proxy.rows(1)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        cli, ["report", "--db", str(proxy.db_path), "--format", "html", "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    card = re.search(
        r'<div class="card" id="top-change">(.*?)</div>\s*</div>', out.read_text(), re.S
    )
    assert card is not None
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", card.group(1))).split())
    assert text == "What to change first Nothing: caching works as intended in this window."
