"""``--format html``: the report as ONE self-contained HTML file (no CDN, no network, no JS).

Charts are inline SVG drawn here: hit rate over time and spend over time (cost vs cost without
cache), one marker per time bucket with a ``<title>`` tooltip, plus the break-reason, group, TTFT
and TTL tables and the recommendations. The page uses a jinja2 template with autoescaping, so
group names, segment paths and request ids from the log cannot inject markup.

Each chart is ``<svg class="chart" data-chart="hit-rate|spend">``; each data point is a
``<circle class="point" data-series=... data-value=...>``: stable hooks for tests and scripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from jinja2 import Environment
from markupsafe import Markup, escape

from .report import Report
from .report_render import (
    REPLICA_HEADER,
    pct,
    priced_as_notes,
    replica_cells,
    summary_rows,
    usd,
)

__all__ = ["render_html"]

_W, _H = 720, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 16, 36


def _label(ts: float, bucket_s: int) -> str:
    fmt = "%m-%d %H:00" if bucket_s < 86400 else "%Y-%m-%d"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime(fmt)


def _chart(
    name: str,
    starts: Sequence[float],
    series: Sequence[tuple[str, Sequence[float | None], str]],
    *,
    bucket_s: int,
    y_max: float,
    y_fmt: str,
) -> Markup:
    """An SVG line chart: ``series`` is (name, values aligned with ``starts``, CSS colour)."""
    y_max = y_max if y_max > 0 else 1.0
    n = len(starts)
    span_w, span_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(i: int) -> float:
        return _LEFT + (span_w * i / (n - 1) if n > 1 else span_w / 2)

    def y(v: float) -> float:
        return _TOP + span_h * (1 - v / y_max)

    parts = [
        f'<svg class="chart" data-chart="{name}" viewBox="0 0 {_W} {_H}" width="{_W}" '
        f'height="{_H}" role="img" xmlns="http://www.w3.org/2000/svg">'
    ]
    for k in range(5):  # horizontal grid and y labels
        v = y_max * k / 4
        parts.append(
            f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
            f'<text class="axis" x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
            f"{escape(y_fmt.format(v))}</text>"
        )
    ticks = sorted({0, n - 1, *range(0, n, max(1, n // 6))}) if n else []
    for i in ticks:
        parts.append(
            f'<text class="axis" x="{x(i):.1f}" y="{_H - 12}" text-anchor="middle">'
            f"{escape(_label(starts[i], bucket_s))}</text>"
        )
    for series_name, values, colour in series:
        points = [(x(i), y(v), v, i) for i, v in enumerate(values) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _, _ in points)
            parts.append(
                f'<polyline class="line" data-series="{series_name}" points="{path}" '
                f'stroke="{colour}"/>'
            )
        for px, py, v, i in points:
            tip = f"{_label(starts[i], bucket_s)}: {series_name} {y_fmt.format(v)}"
            parts.append(
                f'<circle class="point" data-series="{series_name}" data-value="{v:.6g}" '
                f'cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{colour}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _charts(report: Report) -> tuple[Markup, Markup]:
    points = report.timeline
    starts = [p.start for p in points]
    hit = _chart(
        "hit-rate",
        starts,
        [("hit rate", [p.hit_rate for p in points], "#2563eb")],
        bucket_s=report.bucket_s,
        y_max=1.0,
        y_fmt="{:.0%}",
    )
    top = max((max(p.cost_usd, p.cost_without_cache_usd) for p in points), default=0.0)
    spend = _chart(
        "spend",
        starts,
        [
            ("cost", [p.cost_usd for p in points], "#16a34a"),
            ("cost without cache", [p.cost_without_cache_usd for p in points], "#9ca3af"),
        ],
        bucket_s=report.bucket_s,
        y_max=top * 1.1,
        y_fmt="${:,.2f}",
    )
    return hit, spend


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>promptcache report {{ since }} to {{ until }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px; color: #111; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e5e7eb; text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
svg.chart .grid { stroke: #e5e7eb; } svg.chart .axis { font-size: 11px; fill: #6b7280; }
svg.chart .line { fill: none; stroke-width: 2; }
.legend span { display: inline-block; margin-right: 14px; } code { font-size: 12px; }
</style></head><body>
<h1>promptcache report</h1>
<p>{{ since }} &rarr; {{ until }} &middot; <code>{{ report.db }}</code></p>
<h2>Summary</h2>
<table id="summary">{% for name, value in summary %}
<tr><th>{{ name }}</th><td class="n">{{ value }}</td></tr>{% endfor %}
</table>
{% for note in priced_as_notes %}<p class="note priced-as">* {{ note }}</p>
{% endfor %}<h2>Hit rate over time (token-weighted)</h2>
{{ hit_chart }}
<h2>Spend over time</h2>
<p class="legend"><span style="color:#16a34a">&#9632; cost</span>
<span style="color:#9ca3af">&#9632; cost without cache</span></p>
{{ spend_chart }}
<h2>Cache breaks by reason</h2>
{% if report.break_reasons %}<table id="break-reasons">
<tr><th>reason</th><th class="n">breaks</th><th class="n">tokens lost</th>
<th class="n">$ lost</th><th>top segment</th><th>examples</th></tr>
{% for b in report.break_reasons %}<tr data-reason="{{ b.reason }}"><td>{{ b.reason }}</td>
<td class="n">{{ num(b.breaks) }}</td><td class="n">{{ num(b.tokens_lost) }}</td>
<td class="n">{{ usd(b.usd_lost) }}</td>
<td>{% if b.top_segment %}<code>{{ b.top_segment }}</code> ({{ b.top_segment_breaks }})
{%- else %}-{% endif %}</td>
<td>{% for i in b.example_ids %}<code>{{ i }}</code> {% endfor %}</td></tr>
{% endfor %}</table>{% else %}<p>No cache breaks recorded.</p>{% endif %}
{% if report.groups %}<h2>By {{ report.group_by }}</h2>
<table id="groups"><tr><th>{{ report.group_by }}</th><th class="n">requests</th>
<th class="n">hit rate (tokens)</th><th class="n">hit rate (requests)</th><th class="n">cost</th>
<th class="n">cost without cache</th><th class="n">savings</th><th class="n">breaks</th></tr>
{% for g in report.groups %}<tr><td>{{ g.group }}</td><td class="n">{{ num(g.requests) }}</td>
<td class="n">{{ pct(g.token_hit_rate) }}</td><td class="n">{{ pct(g.request_hit_rate) }}</td>
<td class="n">{{ usd(g.cost_usd) }}</td><td class="n">{{ usd(g.cost_without_cache_usd) }}</td>
<td class="n">{{ usd(g.net_savings_usd) }}</td><td class="n">{{ num(g.breaks) }}</td></tr>
{% endfor %}</table>{% endif %}
{{ replicas }}
<h2>TTFT, successful requests</h2>
{% if report.ttft %}<table id="ttft"><tr><th></th><th class="n">requests</th>
<th class="n">p50 ms</th><th class="n">p95 ms</th></tr>{% for t in report.ttft %}
<tr><td>{{ "cache hit (>= 1 cached token)" if t.hit else "cache miss (0 cached tokens)" }}
</td><td class="n">{{ num(t.requests) }}</td>
<td class="n">{{ ms(t.p50_ms) }}</td><td class="n">{{ ms(t.p95_ms) }}</td></tr>
{% endfor %}</table>{% else %}<p>No TTFT measurements.</p>{% endif %}
{% if report.ttl_advice %}<h2>TTL advisor</h2>
<table id="ttl"><tr><th>prefix family</th><th class="n">requests</th>
<th class="n">prefix tokens</th><th>now</th><th>best</th><th class="n">saves</th></tr>
{% for a in report.ttl_advice %}<tr><td><code>{{ a.label }}</code></td>
<td class="n">{{ num(a.requests) }}</td><td class="n">{{ num(a.prefix_tokens) }}</td>
<td>{{ a.current }}</td><td>{{ a.recommended }}</td><td class="n">{{ usd(a.savings_usd) }}</td></tr>
{% endfor %}</table>{% endif %}
<h2>Recommendations</h2>
<ol id="recommendations">{% for r in report.recommendations %}
<li data-kind="{{ r.kind }}">{{ r.message }}</li>{% else %}
<li>none: caching works as intended in this window.</li>{% endfor %}</ol>
</body></html>
"""

_ENV = Environment(autoescape=True, keep_trailing_newline=True)

_REPLICAS = """<h2>By replica</h2>
<table id="replicas"><tr>{% for name in header %}<th{% if loop.index > 2 %} class="n"{% endif %}>
{{- name }}</th>{% endfor %}</tr>
{% for r, cells in rows %}<tr{% if r.replica is none %} class="fleet-total"{% endif %}
 data-upstream="{{ r.upstream }}" data-replica="{{ r.replica or '' }}">{% for c in cells %}
<td{% if loop.index > 2 %} class="n"{% endif %}>{{ c }}</td>{% endfor %}</tr>
{% endfor %}</table>"""


def _replicas(report: Report) -> Markup:
    """The by-replica table (``Report.replicas``), or nothing when no upstream has replicas."""
    if not report.replicas:
        return Markup("")
    rows = [(r, replica_cells(r)) for r in report.replicas]
    return Markup(_ENV.from_string(_REPLICAS).render(header=REPLICA_HEADER, rows=rows))


def render_html(report: Report) -> str:
    """The whole report as one HTML document (UTF-8 text, no external resources)."""
    hit_chart, spend_chart = _charts(report)

    fmt = "%Y-%m-%d %H:%M UTC"
    return _ENV.from_string(_TEMPLATE).render(
        report=report,
        since=datetime.fromtimestamp(report.since, tz=timezone.utc).strftime(fmt),
        until=datetime.fromtimestamp(report.until, tz=timezone.utc).strftime(fmt),
        summary=summary_rows(report.total, report),
        priced_as_notes=priced_as_notes(report),
        hit_chart=hit_chart,
        spend_chart=spend_chart,
        replicas=_replicas(report),
        pct=pct,
        usd=usd,
        num="{:,}".format,
        ms="{:,.1f}".format,
    )
