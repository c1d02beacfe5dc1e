"""``--format html``: the report as ONE self-contained HTML file (inline SVG and CSS, no network).

The page answers three questions first: what caching saved and what it could still save (the
headline), where in the prompt the cache breaks and why (the break strip and before/after
diffs), and whether it is getting better (charts over time, TTFT of hits vs misses); the
tables follow. Numbers come from the package (:mod:`.report`) and :mod:`.report.page`; drawing from
:mod:`.report.svg`; markup from :mod:`.report.template`, rendered with jinja2 autoescaping, so
model names, segment paths, excerpts and request ids from the log cannot inject markup.

The static page has no script. The proxy's live page (:mod:`.report.live`) is the same page
with a window selector and a small script that polls ``/report.json`` (:data:`REFRESH_MS`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jinja2 import Environment
from markupsafe import Markup, escape

from promptcache import formatting

from . import Report
from .advice import NO_RECOMMENDATIONS, NOTHING_TO_CHANGE
from .page import Page, build_page
from .render import (
    AGREEMENT_EXAMPLE_HEADER,
    AGREEMENT_HEADER,
    REPLICA_HEADER,
    TTFT_NOTE,
    UNPRICED,
    agreement_cells,
    agreement_example_cells,
    agreement_line,
    block_lost_notes,
    money,
    pct,
    priced_as_notes,
    replica_cells,
    summary_rows,
    usd,
    window_time,
)
from .svg import (
    GREY,
    KIND_COLOURS,
    breaks_chart,
    line_chart,
    reason_colours,
    strip_svg,
    ttft_chart,
)
from .template import CSS, MAIN, PAGE, SCRIPT

__all__ = ["REFRESH_MS", "LiveOptions", "code_spans", "render_html", "render_main"]

#: How often the live page polls ``/report.json`` (ms).
REFRESH_MS = 5000

_ENV = Environment(autoescape=True, keep_trailing_newline=True)
_MAIN = _ENV.from_string(MAIN)
_PAGE = _ENV.from_string(PAGE)


@dataclass(frozen=True)
class LiveOptions:
    """The live page's window selector: the chosen ``window`` among ``choices`` (``15m``...)."""

    window: str
    choices: tuple[str, ...]


_CODE_SPAN = re.compile(r"`([^`]+)`")


def code_spans(text: str) -> Markup:
    """``text`` escaped for HTML, with each Markdown code span (`` `x` ``) as ``<code>x</code>``:
    recommendations name segments and flags that way in the terminal too."""
    return Markup(_CODE_SPAN.sub(lambda m: f"<code>{m.group(1)}</code>", str(escape(text))))


def _bucket_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g}-second"
    if seconds < 3600:
        return f"{seconds / 60:g}-minute"
    if seconds < 86400:
        return f"{seconds / 3600:g}-hour"
    return f"{seconds / 86400:g}-day"


def render_main(report: Report, page: Page | None = None) -> str:
    """The page body (``<main>``'s content) for ``report``; ``page`` is built when omitted.

    Raises:
        ConfigError, StoreError: as :func:`.report.page.build_page`.
    """
    page = build_page(report) if page is None else page
    timeline = page.timeline
    buckets = timeline.buckets
    top_cost = max((max(b.cost_usd, b.cost_without_cache_usd) for b in buckets), default=0.0)
    colours = reason_colours(timeline.reasons)
    strip = page.strip
    return _MAIN.render(
        report=report,
        h=page.headline,
        since=window_time(report.since),
        until=window_time(report.until),
        summary=summary_rows(report.total, report),
        priced_as_notes=priced_as_notes(report),
        block_lost_notes=block_lost_notes(report),
        strip=strip,
        strip_svg=strip_svg(strip) if strip else "",
        has_breakpoints=bool(strip and any(s.breakpoint_ttl is not None for s in strip.segments)),
        kinds=sorted({(s.kind, KIND_COLOURS.get(s.kind, GREY)) for s in strip.segments})
        if strip
        else [],
        diffs=page.diffs,
        families=page.families,
        more_families=page.more_families,
        timeline=timeline,
        bucket=_bucket_text(timeline.bucket_s),
        colours=colours,
        hit_chart=line_chart(
            "hit-rate",
            "token-weighted hit rate per time bucket",
            timeline,
            [("hit rate", [b.hit_rate for b in buckets], "#0072B2", "")],
            y_max=1.0,
            y_fmt="{:.0%}".format,
        ),
        spend_chart=line_chart(
            "spend",
            "spend per time bucket, with and without cache",
            timeline,
            [
                ("cost", [b.cost_usd for b in buckets], "#D55E00", ""),
                (
                    "cost without cache",
                    [b.cost_without_cache_usd for b in buckets],
                    GREY,
                    "5 3",
                ),
            ],
            y_max=top_cost * 1.1,
            y_fmt=lambda v: formatting.usd(v, 4 if top_cost < 1 else 2),
        ),
        breaks_chart=breaks_chart(timeline, colours),
        ttft=page.ttft,
        ttft_chart=ttft_chart(page.ttft),
        code_spans=code_spans,
        ttft_note=TTFT_NOTE,
        no_recommendations=NO_RECOMMENDATIONS,
        nothing_to_change=NOTHING_TO_CHANGE,
        replica_header=REPLICA_HEADER,
        replica_cells=replica_cells,
        agreement_header=AGREEMENT_HEADER,
        agreement_cells=agreement_cells,
        agreement_example_header=AGREEMENT_EXAMPLE_HEADER,
        agreement_example_cells=agreement_example_cells,
        agreement_line=agreement_line,
        pct=pct,
        usd=usd,
        money=money,
        unpriced=UNPRICED,
        num="{:,}".format,
        ms="{:,.1f}".format,
    )


def render_html(report: Report, *, live: LiveOptions | None = None) -> str:
    """The whole report as one HTML document (UTF-8 text, no external resources).

    Raises:
        ConfigError, StoreError: ``report.db`` cannot be read again for the page's figures.
    """
    return _PAGE.render(
        since=window_time(report.since),
        until=window_time(report.until),
        css=Markup(CSS),
        main=Markup(render_main(report)),
        live=live,
        script=Markup(SCRIPT.replace("REFRESH_MS", str(REFRESH_MS))),
    )
