"""The HTML report's jinja2 template (autoescaped) and its CSS: :mod:`.report.html` fills it.

``MAIN`` is the page body (also served alone as ``/report?part=main`` for the live page's
refresh); ``PAGE`` wraps it with the head, the CSS and, on the live page only, the window
selector and the refresh script. Layout: one column up to 1,000 px, cards and charts flow into a
grid from 720 px; tables and diffs scroll inside their own box, so the page never scrolls
sideways at 360 px. ``@page`` and ``@media print`` fit it on A4.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSS", "MAIN", "PAGE", "SCRIPT"]

CSS: Final = """
:root { --ink: #111; --muted: #555; --line: #ddd; --bg: #fff; --card: #f6f7f9; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  background: var(--bg); margin: 0 auto; max-width: 1040px; padding: 16px; }
h1 { font-size: 21px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
p, li { overflow-wrap: anywhere; } code { font-size: 13px; overflow-wrap: anywhere; }
.muted { color: var(--muted); } .small { font-size: 13px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(230px, 1fr)); gap: 12px; }
.card { background: var(--card); border-radius: 8px; padding: 12px 14px; }
.card .big { font-size: 26px; font-weight: 650; font-variant-numeric: tabular-nums; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 440px), 1fr));
  gap: 16px; }
figure { margin: 0; min-width: 0; } figcaption { font-size: 13px; color: var(--muted); }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart .grid { stroke: #e3e3e3; } svg.chart .axis { font-size: 11px; fill: #555; }
svg.chart .count { font-size: 10px; fill: #111; }
svg.chart[data-chart="strip"] text { font-size: 16px; }
svg.chart .line { fill: none; stroke-width: 2; }
.legend { font-size: 13px; margin: 4px 0; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  vertical-align: -1px; margin-right: 4px; border: 1px solid #0003; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 6px 0; font-size: 14px; }
th, td { padding: 4px 9px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
td code { overflow-wrap: normal; white-space: nowrap; }
#strip-segments td, #strip-segments th, #families td, #families th { white-space: nowrap; }
/* a family's label (key / model / prefix) wraps at its spaces, so the numbers beside it fit on
   a desktop-wide page without scrolling */
#families td:first-child, #families td:first-child code { white-space: normal; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
pre.diff { background: var(--card); padding: 8px 10px; border-radius: 6px; margin: 4px 0 12px;
  white-space: pre-wrap; word-break: break-all; font-size: 13px; }
pre.diff del { background: #f7d4c2; text-decoration: line-through; color: #7a2100; }
pre.diff ins { background: #cfe6f5; text-decoration: underline; color: #003b5c; }
.live { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 8px 0; }
.live a { padding: 3px 10px; border: 1px solid var(--line); border-radius: 14px;
  text-decoration: none; color: var(--ink); }
.live a[aria-current] { background: var(--ink); color: #fff; }
/* on a phone a wide table becomes one card per row: each cell on its own line after its column
   name, the first cell as the card's title */
@media (max-width: 600px) {
  #summary td.n { white-space: normal; }
  table.cards-narrow, table.cards-narrow tbody, table.cards-narrow tr, table.cards-narrow td {
    display: block; width: 100%; }
  table.cards-narrow tr.head { display: none; }
  table.cards-narrow tr { background: var(--card); border-radius: 8px; padding: 8px 12px;
    margin: 0 0 10px; }
  table.cards-narrow td { border: 0; padding: 2px 0; white-space: normal; text-align: right; }
  table.cards-narrow td::before { content: attr(data-label); color: var(--muted);
    float: left; margin-right: 12px; }
  table.cards-narrow td.title { display: block; text-align: left; font-weight: 600;
    padding-bottom: 4px; }
  table.cards-narrow td.title::before { content: none; }
  table.cards-narrow td.title code, table.cards-narrow td code { white-space: normal;
    overflow-wrap: anywhere; }
}
@page { size: A4; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  .live { display: none; }
  section, figure, .card, table { break-inside: avoid; }
  .charts { grid-template-columns: 1fr 1fr; }
  .scroll { overflow: visible; }
}
"""

#: The live page's refresh: poll /report.json, and when its numbers change fetch the body again.
SCRIPT: Final = """
(function () {
  var body = document.body, win = body.dataset.window, last = null, refreshes = 0;
  var status = document.getElementById("live-status");
  var options = {credentials: "same-origin", cache: "no-store"};
  function say(text) { if (status) { status.textContent = text; } }
  function clock() { return new Date().toLocaleTimeString(); }
  function ok(r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r; }
  function tick() {
    fetch("report.json?window=" + win, options)
      .then(function (r) { return ok(r).json(); })
      .then(function (data) {
        var key = JSON.stringify([data.total, data.break_reasons, data.ttft, data.until]);
        body.dataset.requests = data.total.requests;
        if (last === null || key === last) {
          last = key;
          say("live: " + data.total.requests + " requests; checked " + clock());
          return null;
        }
        last = key;
        return fetch("report?part=main&window=" + win, options)
          .then(function (r) { return ok(r).text(); })
          .then(function (html) {
            document.getElementById("page").innerHTML = html;
            refreshes += 1;
            body.dataset.refreshes = refreshes;
            say("live: " + data.total.requests + " requests; updated " + clock());
          });
      })
      .catch(function (err) { say("refresh failed (" + err.message + "); retrying"); });
  }
  tick();
  setInterval(tick, REFRESH_MS);
})();
"""

MAIN: Final = """<header>
<h1>promptcache report</h1>
<p class="muted small">{{ since }} &rarr; {{ until }} &middot;
<span id="requests">{{ num(report.total.requests) }}</span> request
{{- "" if report.total.requests == 1 else "s" }} &middot; <code>{{ report.db_shown }}</code></p>
</header>
<section id="headline" class="cards">
<div class="card" id="saved"><div class="muted small">Caching saved</div>
<div class="big">{{ money(report.total, h.saved_usd) }}</div>
<div class="small">{% if h.saved_fraction is not none %}{{ pct(h.saved_fraction) }} of the
{{ usd(report.total.cost_without_cache_usd) }} it would have cost without cache{% else %}no priced
traffic in this window{% endif %}</div></div>
<div class="card" id="left"><div class="muted small">Left on the table</div>
<div class="big">{{ unpriced if h.left_unpriced else money(report.total, h.left_usd) }}</div>
<div class="small">{{ num(h.left_tokens) }} input tokens lost to {{ num(report.total.breaks) }}
cache break{{ "" if report.total.breaks == 1 else "s" }} (the upstream's token counts); the
dollars are what reading them from the cache would have saved</div></div>
<div class="card" id="top-change"><div class="muted small">What to change first</div>
{% if h.change %}<div class="small" data-kind="{{ h.change.kind }}">
{{- code_spans(h.change.message) }}</div>{% else %}<div class="small">Nothing:
{{ nothing_to_change }}</div>{% endif %}
</div>
</section>
{% for note in priced_as_notes %}<p class="note priced-as small">* {{ note }}</p>
{% endfor %}
<section id="breaks">
<h2>Where the prompt breaks</h2>
{% if strip %}<p class="small">Request <code>{{ strip.request_id }}</code>{% if strip.reason %}
(the latest <code>{{ strip.reason }}</code>){% endif %}{% if strip.input_tokens is not none %}, {{
num(strip.input_tokens) }} input tokens (the upstream's count, from its usage){% endif %}: its
segments in order, each as wide as its share of the prompt ({% if strip.unit == "tokens" %}its
<code>cl100k_base</code> tokens, counted per segment by the proxy{% else %}its characters: this
request was logged without per-segment token counts{% endif %}). &#9650; marks where the
window's breaks first differ, with their count{% if has_breakpoints %}; dashed lines are cache
breakpoints{% endif %}.</p>
<figure id="strip">{{ strip_svg }}
<figcaption class="legend">{% for kind, colour in kinds %}<span><span class="swatch"
style="background:{{ colour }}"></span>{{ kind }}</span>{% endfor %}<span>&#9650; first
divergence</span></figcaption></figure>
<div class="scroll"><table id="strip-segments" class="cards-narrow"><tr class="head">
<th>segment</th><th>kind</th><th class="n">share</th><th class="n">breaks here</th>
<th>commonest first differing character</th></tr>
{% for s in strip.segments if s.breaks or s.breakpoint_ttl is not none %}
<tr data-path="{{ s.path }}">
<td class="title" data-label="segment"><code>{{ s.path }}</code></td>
<td data-label="kind">{{ s.kind }}</td>
<td class="n" data-label="share">{{ pct(strip.share(s)) }}</td>
<td class="n" data-label="breaks here">{{ num(s.breaks) }}</td>
<td data-label="first differing character">{% if s.offset is not none %}character
{{ num(s.offset) }} ({{ num(s.offset_breaks) }} break{{ "" if s.offset_breaks == 1 else "s" }})
{%- elif s.breaks %}offset not logged
{%- endif %}{% if s.breakpoint_ttl is not none %}{{ "; " if s.breaks }}breakpoint
{{- " " + s.breakpoint_ttl if s.breakpoint_ttl }}{% endif %}</td></tr>
{% endfor %}</table></div>
{% if strip.outside %}<p class="small">{{ num(strip.outside) }} more
{{ "break first differs" if strip.outside == 1 else "breaks first differ" }} in segments this
request does not have.</p>{% endif %}
{% if strip.unplaced %}<p class="small">Breaks not tied to a segment: {% for r, n in strip.unplaced
%}{{ r }} {{ num(n) }}{{ ", " if not loop.last }}{% endfor %}.</p>{% endif %}
{% else %}<p>No request with a logged prompt layout in this window.</p>{% endif %}
<h3>Top first divergences, before &rarr; after</h3>
{% for d in diffs %}<div class="diff-item" data-breaks="{{ d.breaks }}">
<p class="small"><strong>{{ num(d.breaks) }} break{{ "" if d.breaks == 1 else "s" }}</strong>
&middot; {{ d.reason }}{% if d.segment %} in <code>{{ d.segment }}</code>{% endif %}{% if d.offset
is not none %}: {{ d.kind or "a change" }} from character {{ num(d.offset) }}{% endif %} &middot;
e.g. request
<code>{{ d.request_id }}</code></p>
<pre class="diff">- {% for r in d.before %}{% if r.kind == "removed" %}<del>{{ r.text }}</del>
{%- else %}{{ r.text }}{% endif %}{% endfor %}
+ {% for r in d.after %}{% if r.kind == "added" %}<ins>{{ r.text }}</ins>
{%- else %}{{ r.text }}{% endif %}{% endfor %}</pre></div>
{% else %}<p class="small">No excerpts in this window{% if report.total.breaks %}: the proxy stores
them only with <code>--store-bodies</code>{% endif %}.</p>{% endfor %}
</section>
<section id="families-section">
<h2>Prefix families</h2>
<p class="small muted">Requests sharing an API key, a model and a prompt prefix (each request
joins the family of the request it shares its longest prefix with; the id is the first
request's first segment hash), costliest first.</p>
{% if families %}<div class="scroll"><table id="families" class="cards-narrow"><tr class="head">
<th>family</th><th class="n">requests</th><th class="n">hit rate</th><th class="n">cache read</th>
<th class="n">cost</th><th class="n">saved</th><th>top break reason</th></tr>
{% for f in families %}<tr><td class="title" data-label="family"><code>{{ f.label }}</code></td>
<td class="n" data-label="requests">{{ num(f.requests) }}</td>
<td class="n" data-label="hit rate">{{ pct(f.hit_rate) }}</td>
<td class="n" data-label="cache read">{{ num(f.cache_read_tokens) }}</td>
<td class="n" data-label="cost">{{ usd(f.cost_usd) }}</td>
<td class="n" data-label="saved">{{ usd(f.savings_usd) }}</td>
<td data-label="top break reason">{% if f.top_reason %}{{ f.top_reason }}
({{ num(f.top_reason_breaks) }}){%- else %}-{% endif %}</td></tr>
{% endfor %}</table></div>{% if more_families %}<p class="small">{{ num(more_families) }} more
famil{{ "y" if more_families == 1 else "ies" }}.</p>{% endif %}{% else %}<p>No prefix families in
this window.</p>{% endif %}
</section>
<section id="over-time">
<h2>Over time</h2>
<p class="small muted">{{ bucket }} buckets, UTC, from the first to the last request.</p>
<div class="charts">
<figure><h3>Hit rate (token-weighted)</h3>{{ hit_chart }}</figure>
<figure><h3>Spend</h3>{{ spend_chart }}<figcaption class="legend"><span><span class="swatch"
style="background:#D55E00"></span>cost</span><span><span class="swatch"
style="background:#999"></span>without cache (dashed)</span></figcaption></figure>
<figure><h3>Cache breaks by reason</h3>{% if timeline.reasons %}{{ breaks_chart }}
<figcaption class="legend">{% for r in timeline.reasons %}<span><span class="swatch"
style="background:{{ colours[r] }}"></span>{{ r }}</span>{% endfor %}</figcaption>{% else %}
<p class="small">No cache breaks in this window.</p>{% endif %}</figure>
<figure><h3>Time to first token</h3>{% if ttft.hit %}{{ ttft_chart }}{% endif %}
<figcaption id="ttft-caption">{{ ttft.caption }} Bar heights: share of each class; labels:
requests (successful only; a hit read &ge; 1 cached token). Measured as the {{ ttft_note }}.
</figcaption></figure>
</div>
</section>
<section id="details">
<h2>Details</h2>
<div class="scroll"><table id="summary">{% for name, value in summary %}
<tr><th>{{ name }}</th><td class="n">{{ value }}</td></tr>{% endfor %}
</table></div>
<h3>Cache breaks by reason</h3>
{% if report.break_reasons %}<div class="scroll"><table id="break-reasons" class="cards-narrow">
<tr class="head"><th>reason</th><th class="n">breaks</th><th class="n">tokens lost</th>
<th class="n">$ lost</th><th>top segment</th><th>examples</th></tr>
{% for b in report.break_reasons %}<tr data-reason="{{ b.reason }}"><td class="title"
data-label="reason">{{ b.reason }}</td>
<td class="n" data-label="breaks">{{ num(b.breaks) }}</td>
<td class="n" data-label="tokens lost">{{ num(b.tokens_lost) }}</td>
<td class="n" data-label="$ lost">{{ money(report.total, b.usd_lost, b) }}</td>
<td data-label="top segment">{% if b.top_segment %}<code>{{ b.top_segment }}</code>
({{ b.top_segment_breaks }}){%- else %}-{% endif %}</td>
<td data-label="examples">{% for i in b.example_ids %}<code>{{ i }}</code> {% endfor %}</td></tr>
{% endfor %}</table></div>{% else %}<p>No cache breaks recorded.</p>{% endif %}
{% for note in block_lost_notes %}<p class="note block-lost small">* {{ note }}</p>{% endfor %}
{% if report.agreement %}<h3>Our reasons against the vendors' own</h3>
<p id="agreement-line">{{ agreement_line(report.agreement) }}</p>
<div class="scroll"><table id="agreement"><tr>{% for name in agreement_header %}
<th{% if loop.index in (4, 5) %} class="n"{% endif %}>{{ name }}</th>{% endfor %}</tr>
{% for r in report.agreement.rows %}<tr data-verdict="{{ r.verdict }}">
{%- for c in agreement_cells(r) %}<td{% if loop.index in (4, 5) %} class="n"{% endif %}>{{ c }}</td>
{%- endfor %}</tr>
{% endfor %}</table></div>
{% if report.agreement.examples %}<h3>Where they disagree (examples)</h3>
<div class="scroll"><table id="agreement-examples"><tr>{% for name in agreement_example_header %}
<th>{{ name }}</th>{% endfor %}</tr>
{% for e in report.agreement.examples %}<tr data-request-id="{{ e.request_id }}">
{%- for c in agreement_example_cells(e) %}<td><code>{{ c }}</code></td>{%- endfor %}</tr>
{% endfor %}</table></div>{% endif %}{% endif %}
{% if report.groups %}<h3>By {{ report.group_by }}</h3>
<div class="scroll"><table id="groups"><tr><th>{{ report.group_by }}</th><th class="n">requests</th>
<th class="n">hit rate (tokens)</th><th class="n">hit rate (requests)</th><th class="n">cost</th>
<th class="n">cost without cache</th><th class="n">savings</th><th class="n">breaks</th></tr>
{% for g in report.groups %}<tr><td>{{ g.group }}</td><td class="n">{{ num(g.requests) }}</td>
<td class="n">{{ pct(g.token_hit_rate) }}</td><td class="n">{{ pct(g.request_hit_rate) }}</td>
<td class="n">{{ money(g, g.cost_usd) }}</td>
<td class="n">{{ money(g, g.cost_without_cache_usd) }}</td>
<td class="n">{{ money(g, g.net_savings_usd) }}</td><td class="n">{{ num(g.breaks) }}</td></tr>
{% endfor %}</table></div>{% endif %}
{% if report.replicas %}<h3>By replica</h3>
<div class="scroll"><table id="replicas"><tr>{% for name in replica_header %}
<th{% if loop.index > 2 %} class="n"{% endif %}>{{ name }}</th>{% endfor %}</tr>
{% for r in report.replicas %}<tr{% if r.replica is none %} class="fleet-total"{% endif %}
 data-upstream="{{ r.upstream }}" data-replica="{{ r.replica or '' }}">
{%- for c in replica_cells(r) %}<td{% if loop.index > 2 %} class="n"{% endif %}>{{ c }}</td>
{%- endfor %}</tr>
{% endfor %}</table></div>{% endif %}
<h3>TTFT, successful requests</h3>
<p class="small muted">The {{ ttft_note }}.</p>
{% if report.ttft %}<div class="scroll"><table id="ttft"><tr><th></th><th class="n">requests</th>
<th class="n">p50 ms</th><th class="n">p95 ms</th></tr>{% for t in report.ttft %}
<tr><td>{{ "cache hit (>= 1 cached token)" if t.hit else "cache miss (0 cached tokens)" }}
</td><td class="n">{{ num(t.requests) }}</td>
<td class="n">{{ ms(t.p50_ms) }}</td><td class="n">{{ ms(t.p95_ms) }}</td></tr>
{% endfor %}</table></div>{% else %}<p>No TTFT measurements.</p>{% endif %}
{% if report.ttl_advice %}<h3>TTL advisor</h3>
<div class="scroll"><table id="ttl" class="cards-narrow"><tr class="head"><th>prefix family</th>
<th class="n">requests</th><th class="n">prefix tokens</th><th>now</th><th>best</th>
<th class="n">saves</th></tr>
{% for a in report.ttl_advice %}<tr><td class="title" data-label="prefix family"><code>{{ a.label
}}</code></td><td class="n" data-label="requests">{{ num(a.requests) }}</td>
<td class="n" data-label="prefix tokens">{{ num(a.prefix_tokens) }}</td>
<td data-label="now">{{ a.current }}</td><td data-label="best">{{ a.recommended }}</td>
<td class="n" data-label="saves">{{ usd(a.savings_usd) }}</td></tr>
{% endfor %}</table></div>{% endif %}
<h3>Recommendations</h3>
<ol id="recommendations">{% for r in report.recommendations %}
<li data-kind="{{ r.kind }}">{{ code_spans(r.message) }}</li>{% else %}
<li>{{ no_recommendations }}</li>{% endfor %}</ol>
</section>
"""

PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>promptcache report {{ since }} to {{ until }}</title>
<style>{{ css }}</style></head>
<body{% if live %} data-window="{{ live.window }}"{% endif %}>
{% if live %}<nav class="live" aria-label="window">{% for name in live.choices %}<a
href="report?window={{ name }}"{% if name == live.window %} aria-current="page"{% endif %}>last
{{ name }}</a>{% endfor %}<span id="live-status" class="small muted">live</span></nav>{% endif %}
<main id="page">{{ main }}</main>
{% if live %}<script>{{ script }}</script>{% endif %}
</body></html>
"""
