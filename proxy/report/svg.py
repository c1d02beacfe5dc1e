"""Inline SVG for the HTML report: line charts, stacked bars, paired histograms, the break strip.

Each chart is ``<svg class="chart" data-chart=NAME viewBox=...>`` scaled by CSS to its column
(``width: 100%``), so it fits 360 px phones and 1,600 px screens alike. Every drawn datum (a line
point, a bar, a histogram bin, a strip segment) is an element of class ``mark`` with
``data-series`` and ``data-value`` and a ``<title>`` tooltip: stable hooks for tests.

Colours are the Okabe-Ito palette, which stays distinguishable with the common colour-vision
deficiencies (https://jfly.uni-koeln.de/color/, checked 2026-12-01); series also differ by dash
or shape, never by colour alone. Text from the log is escaped (:func:`markupsafe.escape`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Final

from markupsafe import Markup, escape

from promptcache.formatting import percent, plural

from .page import BreakStrip, PageTimeline, TtftHistogram
from .page_sql import TTFT_EDGES_MS

__all__ = [
    "GREY",
    "KIND_COLOURS",
    "OKABE_ITO",
    "breaks_chart",
    "line_chart",
    "reason_colours",
    "strip_svg",
    "ttft_chart",
]

#: Okabe-Ito colours (blue, orange, bluish green, reddish purple, sky blue, vermillion, yellow,
#: black), in the order series take them.
OKABE_ITO: Final = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
)  # fmt: skip
GREY: Final = "#999999"
KIND_COLOURS: Final = {"tools": "#E69F00", "system": "#56B4E9", "messages": "#009E73"}
_W, _H = 480, 210
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 10, 12, 30


def _rect(
    series: str,
    value: int,
    box: tuple[float, float, float, float],
    fill: str,
    tip: str,
    extra: str = "",
) -> str:
    """One datum drawn as a rectangle ``box`` = (x, y, width, height), with its tooltip."""
    x, y, w, h = box
    return (
        f'<rect class="mark{extra}" data-series="{escape(series)}" data-value="{value}" '
        f'x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}">'
        f"<title>{escape(tip)}</title></rect>"
    )


def reason_colours(reasons: Sequence[str]) -> dict[str, str]:
    """A colour per break reason, in the given order (cycling past 8)."""
    return {r: OKABE_ITO[i % len(OKABE_ITO)] for i, r in enumerate(reasons)}


def _open(name: str, label: str, height: int = _H, width: int = _W) -> str:
    return (
        f'<svg class="chart" data-chart="{name}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
    )


def time_label(ts: float, bucket_s: float) -> str:
    """A bucket start for axes and tooltips, UTC, as precise as the bucket size needs."""
    when = datetime.fromtimestamp(ts, tz=timezone.utc)
    if bucket_s < 1:
        return when.strftime("%H:%M:%S.") + f"{when.microsecond // 100000}"
    if bucket_s < 60:
        return when.strftime("%H:%M:%S")
    if bucket_s < 86400:
        return when.strftime("%m-%d %H:%M")
    return when.strftime("%Y-%m-%d")


def _frame(
    parts: list[str],
    y_max: float,
    y_fmt: Callable[[float], str],
    labels: Sequence[str],
    x_of: Callable[[int], float],
) -> Callable[[float], float]:
    """Grid, y labels and a few x labels; returns the value -> y mapping."""
    span_h = _H - _TOP - _BOTTOM

    def y(v: float) -> float:
        return _TOP + span_h * (1 - v / y_max)

    for k in range(5):
        v = y_max * k / 4
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
            f'<text class="axis" x="{_LEFT - 4}" y="{y(v) + 4:.1f}" text-anchor="end">'
            f"{escape(y_fmt(v))}</text>"
        )
    n = len(labels)
    ticks = sorted({0, n // 3, 2 * n // 3, n - 1}) if n else []
    for i in ticks:
        anchor = "end" if i == n - 1 and n > 1 else "start" if i == 0 and n > 1 else "middle"
        parts.append(
            f'<text class="axis" x="{x_of(i):.1f}" y="{_H - 10}" text-anchor="{anchor}">'
            f"{escape(labels[i])}</text>"
        )
    return y


def _runs(
    points: list[tuple[float, float, float, int]],
) -> list[list[tuple[float, float, float, int]]]:
    """``points`` (x, y, value, bucket index) split where a bucket is missing, runs of two or
    more only (a lone point is drawn as its mark)."""
    runs: list[list[tuple[float, float, float, int]]] = []
    for point in points:
        if runs and runs[-1][-1][3] == point[3] - 1:
            runs[-1].append(point)
        else:
            runs.append([point])
    return [run for run in runs if len(run) > 1]


def line_chart(
    name: str,
    label: str,
    timeline: PageTimeline,
    series: Sequence[tuple[str, Sequence[float | None], str, str]],
    *,
    y_max: float,
    y_fmt: Callable[[float], str],
) -> Markup:
    """A line chart over the timeline's buckets; ``series`` is (name, values per bucket, colour,
    dash pattern or ""). Buckets without a value (no input) are gaps in the line, not 0."""
    y_max = y_max if y_max > 0 else 1.0
    n = len(timeline.buckets)
    span_w = _W - _LEFT - _RIGHT

    def x(i: int) -> float:
        return _LEFT + (span_w * (i + 0.5) / n if n else span_w / 2)

    labels = [time_label(b.start, timeline.bucket_s) for b in timeline.buckets]
    parts = [_open(name, label)]
    y = _frame(parts, y_max, y_fmt, labels, x)
    for series_name, values, colour, dash in series:
        points = [(x(i), y(v), v, i) for i, v in enumerate(values) if v is not None]
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        for run in _runs(points):  # one line per run of adjacent buckets: gaps stay gaps
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in run)
            parts.append(
                f'<polyline class="line" data-series="{escape(series_name)}" points="{path}" '
                f'stroke="{colour}"{dashed}/>'
            )
        for px, py, v, i in points:
            tip = f"{labels[i]}: {series_name} {y_fmt(v)}"
            parts.append(
                f'<circle class="mark" data-series="{escape(series_name)}" data-value="{v:.6g}" '
                f'cx="{px:.1f}" cy="{py:.1f}" r="2.6" fill="{colour}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def breaks_chart(timeline: PageTimeline, colours: dict[str, str]) -> Markup:
    """Breaks per bucket as bars stacked by reason (``timeline.reasons`` order, bottom up)."""
    n = len(timeline.buckets)
    top = max((sum(c for _, c in b.breaks) for b in timeline.buckets), default=0)
    y_max = float(4 * max(1, math.ceil(top / 4)))  # 4 grid steps of whole breaks
    span_w = _W - _LEFT - _RIGHT
    slot = span_w / n if n else span_w

    def x(i: int) -> float:
        return _LEFT + slot * (i + 0.5)

    labels = [time_label(b.start, timeline.bucket_s) for b in timeline.buckets]
    parts = [_open("breaks", "cache breaks per time bucket, by reason")]
    y = _frame(parts, y_max, "{:,.0f}".format, labels, x)
    width = max(1.0, slot * 0.8)
    for i, bucket in enumerate(timeline.buckets):
        base = 0
        for reason, count in bucket.breaks:
            y0, y1 = y(base), y(base + count)
            tip = f"{labels[i]}: {reason} {count:,}"
            box = (x(i) - width / 2, y1, width, max(0.5, y0 - y1))
            parts.append(_rect(reason, count, box, colours[reason], tip))
            base += count
    parts.append("</svg>")
    return Markup("".join(parts))


def _edge(ms: float) -> str:
    return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms:g}"


def _ttft_bin(low: float, high: float) -> str:
    """A TTFT bin in words, each edge with its unit: ``0-500 ms``, ``500 ms-1 s``, ``1-2 s``;
    the last bin (from the last inner edge) holds every longer TTFT: ``20 s or more``."""
    if high >= TTFT_EDGES_MS[-1]:
        return f"{low:g} ms or more" if low < 1000 else f"{low / 1000:g} s or more"
    if high < 1000:
        return f"{low:g}-{high:g} ms"
    if low >= 1000:
        return f"{low / 1000:g}-{high / 1000:g} s"
    return f"{low:g} ms-{high / 1000:g} s"


def ttft_chart(hist: TtftHistogram) -> Markup:
    """Hits (upper half, bars up) and misses (lower half, bars down) on shared TTFT bins, each
    bar labelled with its count; bar height is the share of its class, so the two shapes
    compare whatever the counts."""
    n = len(hist.hit)
    height = 230
    mid = 112
    half = 84
    span_w = _W - _LEFT - _RIGHT
    slot = span_w / n if n else span_w
    parts = [_open("ttft", "TTFT histogram of cache hits and misses", height)]
    parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{mid}" y2="{mid}"/>')
    parts.append(
        f'<text class="axis" x="{_LEFT - 4}" y="{mid - half + 8}" text-anchor="end">hits</text>'
    )
    parts.append(
        f'<text class="axis" x="{_LEFT - 4}" y="{mid + half}" text-anchor="end">misses</text>'
    )
    for series, counts, colour, sign in (
        ("hit", hist.hit, OKABE_ITO[0], -1),
        ("miss", hist.miss, OKABE_ITO[5], 1),
    ):
        total = sum(counts) or 1
        for i, count in enumerate(counts):
            if not count:
                continue
            h = max(1.0, (half - 12) * count / total)
            x0 = _LEFT + slot * i + slot * 0.1
            y0 = mid - h if sign < 0 else mid
            label_y = y0 - 3 if sign < 0 else mid + h + 11
            low, high = hist.edges_ms[i], hist.edges_ms[i + 1]
            requests = plural(count, "request", grouped=True)
            tip = f"{series}: {requests} with TTFT {_ttft_bin(low, high)}"
            parts.append(
                _rect(series, count, (x0, y0, slot * 0.8, h), colour, tip)
                + f'<text class="count" x="{x0 + slot * 0.4:.1f}" y="{label_y:.1f}" '
                f'text-anchor="middle">{count:,}</text>'
            )
    for i, edge in enumerate(hist.edges_ms):
        parts.append(
            f'<text class="axis" x="{_LEFT + slot * i:.1f}" y="{height - 4}" '
            f'text-anchor="middle">{escape(_edge(edge))}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _breaks_differ(count: int) -> str:
    """``1 break first differs``, ``3 breaks first differ``."""
    verb = "differs" if count == 1 else "differ"
    return f"{plural(count, 'break', grouped=True)} first {verb}"


def strip_svg(strip: BreakStrip) -> Markup:
    """The request's segments left to right, width proportional to ``strip.unit`` (tokens, or
    characters for rows logged without per-segment token counts); a dashed line and ``bp``
    label where a cache breakpoint closes a segment; a triangle with the break count where
    breaks first diverge (at the commonest offset inside the segment)."""
    width, height = 2 * _W, 110  # twice as wide as a chart: it spans the page, text stays small
    y0, bar_h = 30, 40
    span_w = width - 20
    total = strip.total or 1
    label = f"the prompt's segments, width by share of {strip.unit}, with break marks"
    parts = [_open("strip", label, height, width)]
    x = 10.0
    for seg in strip.segments:
        size = strip.size(seg)
        w = span_w * size / total
        colour = KIND_COLOURS.get(seg.kind, GREY)
        tip = f"{seg.path} ({seg.kind}): {percent(strip.share(seg))} of the prompt"
        if seg.breaks:
            tip += f"; {_breaks_differ(seg.breaks)} here"
        box = (x, y0, max(0.5, w - 1), bar_h)
        parts.append(_rect(seg.kind, size, box, colour, tip, " segment"))
        if seg.breakpoint_ttl is not None:
            bx = x + w - 0.5
            ttl = f" {seg.breakpoint_ttl}" if seg.breakpoint_ttl else ""
            parts.append(
                f'<line class="breakpoint" x1="{bx:.1f}" x2="{bx:.1f}" y1="{y0 - 12}" '
                f'y2="{y0 + bar_h + 4}" stroke="#000" stroke-dasharray="3 2"/>'
                f'<text class="axis" x="{bx:.1f}" y="{y0 - 14}" text-anchor="end">'
                f"bp{escape(ttl)}</text>"
            )
        if seg.breaks:
            fraction = seg.offset / seg.chars if seg.offset is not None and seg.chars else 0.0
            mx = x + w * min(1.0, max(0.0, fraction))
            mark = f"{_breaks_differ(seg.breaks)} in {seg.path}"
            ty = y0 + bar_h + 3
            parts.append(
                f'<path class="divergence" data-value="{seg.breaks}" '
                f'd="M{mx:.1f},{ty} l-8,15 h16 z" fill="#D55E00" stroke="#000" stroke-width="0.8">'
                f"<title>{escape(mark)}</title></path>"
                f'<text class="count" x="{mx:.1f}" y="{ty + 31}" text-anchor="middle">'
                f"{seg.breaks:,}</text>"
            )
        x += w
    parts.append("</svg>")
    return Markup("".join(parts))
