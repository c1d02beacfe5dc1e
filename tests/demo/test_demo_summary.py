"""The demo's results table and sentences (promptcache.demo.summary) on request results made
here: TTFT split by the share of the prompt read from the cache, what a hit read, savings shares
rounded like every other percentage. Each printed number is compared with a count made here."""

from __future__ import annotations

import statistics
from decimal import Decimal

from rich.console import Console

from promptcache.demo.summary import (
    VariantSummary,
    explanation,
    render_summary,
    summarize_variant,
)
from promptcache.demo.workload import RequestResult
from promptcache.formatting import percent


def _result(i: int, prompt: int, cached: int, ttft_ms: float) -> RequestResult:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": 20,
        "total_tokens": prompt + 20,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return RequestResult(f"u{i % 3}", 0, i, prompt, cached, 20, ttft_ms, usage, "ok")


# The naive app's shape: a "hit" reads the 16 tokens before the timestamp, and those requests
# are the later, longer turns (slower); the layered app reads most of every prompt.
NAIVE = [_result(i, 1680 + 40 * i, 16 if i % 4 else 0, 19_000.0 + 1_000 * i) for i in range(12)]
LAYERED = [_result(i, 1700 + 40 * i, 0 if i == 0 else 1600 + 30 * i, 800.0 + i) for i in range(12)]


def _variants() -> tuple[VariantSummary, VariantSummary]:
    naive = summarize_variant(
        "naive", "naive_app.py", NAIVE, users=3, wall_s=1, price_model="gpt-5"
    )
    layered = summarize_variant(
        "layered", "layered_app.py", LAYERED, users=3, wall_s=1, price_model="gpt-5"
    )
    return naive, layered


def _row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"│ {label} "))
    return [c.strip() for c in line.split("│")][-3:-1]


def test_ttft_is_split_by_the_share_of_the_prompt_read_from_cache() -> None:
    naive, layered = _variants()
    console = Console(record=True, width=140)
    render_summary(console, naive, layered)
    text = console.export_text()
    for column, results in enumerate((NAIVE, LAYERED)):
        mostly = [r for r in results if r.cached_tokens * 2 >= r.prompt_tokens]
        rest = [r for r in results if r.cached_tokens * 2 < r.prompt_tokens]
        shown = _row(text, "TTFT p50, >= half the prompt from cache")[column]
        assert shown == (
            f"{statistics.median(r.ttft_ms for r in mostly):,.0f} ms ({len(mostly)} req.)"
            if mostly
            else "n/a (none)"
        )
        shown = _row(text, "TTFT p50, < half from cache (or none)")[column]
        assert shown == f"{statistics.median(r.ttft_ms for r in rest):,.0f} ms ({len(rest)} req.)"
        hits = [r.cached_tokens / r.prompt_tokens for r in results if r.cached_tokens]
        assert _row(text, "  share of its prompt a hit read, median")[column] == percent(
            statistics.median(hits)
        )
    # the naive app's "hits" are named for what they are: a sliver of the prompt
    assert naive.mostly_cached_requests == 0 and naive.hit_requests == 9
    assert "TTFT p50, cache hits" not in text
    words = " ".join(text.split())
    share = statistics.median(r.cached_tokens / r.prompt_tokens for r in NAIVE if r.cached_tokens)
    assert f"the naive app's hits read a median {percent(share)} of their prompt" in words
    assert share < 0.01


def test_savings_share_is_never_printed_as_zero_percent() -> None:
    naive, layered = _variants()
    tiny = VariantSummary(
        **{
            **naive.__dict__,
            "cost_usd": Decimal("0.900000"),
            "cost_without_cache_usd": Decimal("0.900090"),
        }
    )
    console = Console(record=True, width=140)
    render_summary(console, tiny, layered)
    saved = _row(console.export_text(), "saved by caching")[0]
    assert saved == "$0.000090 (<0.1%)"
    assert "(0%)" not in console.export_text() and "(0.0%)" not in saved
    assert "0.0%" not in explanation(tiny, layered).replace("10.0%", "")
