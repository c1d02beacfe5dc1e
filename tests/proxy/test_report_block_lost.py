"""A break's tokens lost on an upstream that caches by itself counts its predecessor's whole
input as cached; OpenAI's cache holds 128-token increments from 1,024 tokens on, an engine's
whole KV blocks, so the figure can exceed what a stable prefix could have read. The report says
by how much under its breaks table; the bound is checked here against the readable prefix
worked out from OpenAI's rule (https://developers.openai.com/api/docs/guides/prompt-caching).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from promptcache.proxy.record import COLUMN_NAMES
from promptcache.proxy.report import build_report
from promptcache.proxy.report.html import render_html
from promptcache.proxy.report.render import render_json, render_table
from promptcache.proxy.store import open_log

T0 = 1_764_493_200.0  # 2025-11-30 09:00 UTC
FAMILY = {"key_fingerprint": "k", "model": "gpt-4o", "first_segment_hash": "f"}

OPENAI_NOTE = (
    "* 1 break of the OpenAI upstream: tokens lost counts the predecessor's whole input as "
    "cached, but OpenAI's automatic cache holds a prompt's prefix from 1,024 tokens on, in "
    "128-token increments (https://developers.openai.com/api/docs/guides/prompt-caching), so "
    "each such break lost up to 127 tokens fewer than counted, and none when it or its "
    "predecessor had fewer than 1,024"
)
COMPATIBLE_NOTE = (
    "* 1 break of OpenAI-compatible upstreams: tokens lost counts the predecessor's whole input "
    "as cached, but an engine's automatic prefix cache holds whole KV blocks only (vLLM's also "
    "leaves out the last prompt token: https://docs.vllm.ai/en/latest/design/prefix_caching.html),"
    " so each such break lost up to one block fewer than counted"
)


def _row(rid: str, at: float, tokens: int, **values: Any) -> dict[str, Any]:
    out = dict.fromkeys(COLUMN_NAMES)
    out.update(id=rid, started_at=at, stream=0, status=200, api="openai_chat", **FAMILY)
    out.update(
        uncached_input_tokens=tokens, cache_read_tokens=0, cache_write_5m_tokens=0,
        cache_write_1h_tokens=0, cache_write_unknown_tokens=0, output_tokens=5,
        reasoning_tokens=0, total_input_tokens=tokens,
    )  # fmt: skip
    out.update(values)
    return out


def _report(tmp_path: Path, vendor: str, before: int, after: int, **first: Any) -> Any:
    db = open_log(tmp_path / "log.db")
    with db.conn:
        first_row = _row("p", T0, before, vendor=vendor, **first)
        reason = {"previous_request_id": "p", "break_reason": "system_changed"}
        db.table("requests").insert_all(
            [first_row, _row("b", T0 + 10, after, vendor=vendor, **reason)]
        )
    db.close()
    return build_report(tmp_path / "log.db", since=T0, until=T0 + 3600, now=T0 + 3600)


def _readable_openai(tokens: int) -> int:
    """The longest prefix of a ``tokens``-token prompt OpenAI's cache can serve: none below
    1,024, else 1,024 plus whole 128-token increments."""
    return 0 if tokens < 1024 else 1024 + (tokens - 1024) // 128 * 128


@pytest.mark.parametrize(("before", "after"), [(1100, 1200), (1151, 1400), (2047, 2100)])
def test_an_openai_break_says_its_figure_may_exceed_the_readable_prefix(
    tmp_path: Path, before: int, after: int
) -> None:
    report = _report(tmp_path, "openai", before, after)
    ((reason, lost),) = [(b.reason, b.tokens_lost) for b in report.break_reasons]
    assert (reason, lost) == ("system_changed", min(after, before))
    could_read = min(after, _readable_openai(before))
    assert 0 < lost - could_read <= 127  # what the note says, on this break
    assert report.automatic_breaks == {"openai": 1}
    assert json.loads(render_json(report))["automatic_breaks"] == {"openai": 1}
    text = " ".join(render_table(report, width=200).split())
    assert OPENAI_NOTE in text and COMPATIBLE_NOTE not in text
    page = " ".join(html.unescape(render_html(report)).split())
    assert OPENAI_NOTE in page


def test_an_openai_predecessor_under_the_minimum_had_nothing_to_read(tmp_path: Path) -> None:
    report = _report(tmp_path, "openai", 900, 1500)
    (b,) = report.break_reasons
    assert b.tokens_lost == 900 and _readable_openai(900) == 0  # the note's 'or none'
    assert OPENAI_NOTE in " ".join(render_table(report, width=200).split())


def test_a_self_hosted_break_says_its_figure_counts_whole_tokens(tmp_path: Path) -> None:
    report = _report(tmp_path, "openai_compatible", 100, 120)
    assert [b.tokens_lost for b in report.break_reasons] == [100]
    assert report.automatic_breaks == {"openai_compatible": 1}
    text = " ".join(render_table(report, width=200).split())
    assert COMPATIBLE_NOTE in text and OPENAI_NOTE not in text
    assert COMPATIBLE_NOTE in " ".join(html.unescape(render_html(report)).split())


@pytest.mark.parametrize(
    "first",
    [
        {"breakpoints": '[{"path": "messages[0]", "ttl": null}]'},  # prompt_cache_breakpoint
        {"cache_write_unknown_tokens": 1024, "total_input_tokens": 2124},  # reported its write
    ],
)
def test_a_break_after_a_reported_write_gets_no_note(tmp_path: Path, first: Any) -> None:
    # its figure is the predecessor's reads + writes, as the vendor counted them
    report = _report(tmp_path, "openai", 1100, 1200, **first)
    assert report.automatic_breaks == {}
    text = " ".join(render_table(report, width=200).split())
    assert "tokens lost counts the predecessor's whole input" not in text
